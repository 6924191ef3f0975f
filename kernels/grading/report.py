"""What one check or one graded submission found: a table for the notebook, text for a terminal,
a dict for the grader's files.

The notebook shows one row per case (what it tests, pass or fail, the largest error, the first wrong
index and what went wrong), then the performance against its target and the roofline, then the
predictions. The same object, turned into a dict, travels from the grader's sandboxed process to
the files it writes.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

from . import verdicts as V
from .harness import CaseResult
from .perf import PerfResult
from .predict import Answer, MeasuredRow


@dataclass
class Report:
    exercise_id: str
    title: str = ""
    backend: str = ""
    device: str = ""
    stage_verdict: str = ""  # a failure before the cases (extraction, screen, signature, compile, launch)
    stage_message: str = ""
    cases: list[CaseResult] = field(default_factory=list)
    perf: PerfResult | None = None
    answers: list[Answer] = field(default_factory=list)
    measured: list[MeasuredRow] = field(default_factory=list)
    measure_note: str = ""
    notes: list[str] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)  # memory-traffic hints (kernels.traffic.feedback), not graded
    show_expected: bool = False  # the grader may show expected answers; the student check does not

    # ---------------------------------------------------------------------------------- verdicts
    @property
    def verdict(self) -> str:
        """The one word for the whole submission (see verdicts.SEVERITY)."""
        if self.stage_verdict:
            return self.stage_verdict
        public = [c.verdict for c in self.cases if c.visibility == "public" and V.is_failure(c.verdict)]
        others = [c.verdict for c in self.cases if c.visibility != "public" and V.is_failure(c.verdict)]
        if public:
            return V.worst(public + others)
        if others:
            if any(c.visibility == "hidden" for c in self.cases) and not any(
                    v in (V.TIMEOUT, V.MEMORY_LIMIT, V.ENVIRONMENT) for v in others):
                return V.HIDDEN_FAILED
            return V.worst(others)
        if self.perf is not None and V.is_failure(self.perf.verdict):
            return V.TOO_SLOW if self.perf.verdict == V.TOO_SLOW else self.perf.verdict
        failed = [a.verdict for a in self.answers if V.is_failure(a.verdict)]
        if failed:
            return V.worst(failed)
        return V.PASSED

    @property
    def ok(self) -> bool:
        return self.verdict == V.PASSED

    def __bool__(self) -> bool:
        return self.ok

    def detail(self) -> str:
        """One line explaining the verdict (for a CSV column)."""
        if self.stage_verdict:
            return self.stage_message.splitlines()[0] if self.stage_message else V.message(self.stage_verdict)
        bad = [c for c in self.cases if V.is_failure(c.verdict)]
        if bad:
            first = min(bad, key=lambda c: V.SEVERITY.index(c.verdict) if c.verdict in V.SEVERITY else 99)
            return f"{first.visibility} case {first.name}: {first.message or V.message(first.verdict)}"[:300]
        if self.perf is not None and V.is_failure(self.perf.verdict):
            return self.perf.summary()
        wrong = [a.key for a in self.answers if V.is_failure(a.verdict)]
        if wrong:
            return "wrong or missing: " + ", ".join(wrong)
        return ""

    def counts(self, visibility: str) -> tuple[int, int]:
        """(passed, total) for the cases of one visibility; skipped cases are not counted."""
        cases = [c for c in self.cases if c.visibility == visibility and c.verdict != V.SKIPPED]
        return sum(c.passed for c in cases), len(cases)

    # ---------------------------------------------------------------------------------- dicts
    def to_dict(self) -> dict[str, Any]:
        return {"exercise": self.exercise_id, "title": self.title, "backend": self.backend, "device": self.device,
                "stage_verdict": self.stage_verdict, "stage_message": self.stage_message,
                "cases": [c.to_dict() for c in self.cases],
                "perf": self.perf.to_dict() if self.perf else None,
                "answers": [a.to_dict() for a in self.answers],
                "measured": [m.to_dict() for m in self.measured], "measure_note": self.measure_note,
                "notes": self.notes, "feedback": self.feedback, "verdict": self.verdict}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        return cls(d["exercise"], d.get("title", ""), d.get("backend", ""), d.get("device", ""),
                   d.get("stage_verdict", ""), d.get("stage_message", ""),
                   [CaseResult.from_dict(c) for c in d.get("cases", [])],
                   PerfResult.from_dict(d["perf"]) if d.get("perf") else None,
                   [Answer.from_dict(a) for a in d.get("answers", [])],
                   [MeasuredRow(**m) for m in d.get("measured", [])], d.get("measure_note", ""),
                   list(d.get("notes", [])), list(d.get("feedback", [])))

    # ---------------------------------------------------------------------------------- text
    def __str__(self) -> str:
        lines = [f"{self.exercise_id}: {self.verdict.upper()}" + (f" ({self.detail()})" if not self.ok else "")]
        if self.device:
            lines.append(f"  ran on: {self.device}")
        if self.stage_verdict:
            lines.append(f"  {V.message(self.stage_verdict)}:")
            lines += ["    " + line for line in self.stage_message.splitlines()]
        for c in self.cases:
            err = _fmt_error(c.max_error)
            lines.append(f"  [{'ok' if c.passed else c.verdict}] {c.visibility:7s} {c.name:28s} max error {err:>9s}"
                         + (f"  first wrong {c.first_wrong}" if c.first_wrong else "")
                         + (f"  {c.message}" if not c.passed and c.message else ""))
        if self.perf is not None:
            lines.append(f"  performance [{self.perf.verdict}]: {self.perf.summary()}")
            if self.perf.intensity is not None:
                lines.append(f"  roofline: {_roofline_text(self.perf)}")
        for a in self.answers:
            exp = f" (expected {a.expected!r})" if self.show_expected and a.verdict != V.PASSED else ""
            lines.append(f"  [{'ok' if a.verdict == V.PASSED else a.verdict}] {a.key} = {a.given!r}{exp}")
        for m in self.measured:
            lines.append(f"  measured: {m.label}: predicted {m.predicted!r}, measured {m.measured!r} {m.note}")
        if self.measure_note:
            lines.append(f"  {self.measure_note}")
        lines += [f"  note: {n}" for n in self.notes]
        if self.feedback:
            lines.append("  memory traffic (not graded; recorded on the CPU backend):")
            lines += [f"    {f}" for f in self.feedback]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        color = "green" if self.ok else "crimson"
        parts = [f"<div><b style='color:{color}'>{'&#10004;' if self.ok else '&#10008;'} "
                 f"{esc(self.title or self.exercise_id)}: {esc(V.message(self.verdict))}</b>"
                 + (f" <span style='font-size:smaller'>({esc(self.device)})</span>" if self.device else "") + "</div>"]
        if self.stage_verdict:
            parts.append(f"<pre style='white-space:pre-wrap'>{esc(self.stage_message)}</pre>")
        if self.cases:
            rows = []
            for c in self.cases:
                mark = "&#10004;" if c.passed else ("&#8211;" if c.verdict == V.SKIPPED else "&#10008;")
                col = "green" if c.passed else ("gray" if c.verdict == V.SKIPPED else "crimson")
                rows.append(
                    f"<tr><td>{esc(c.visibility)}</td><td><code>{esc(c.name)}</code></td><td>{esc(c.why)}</td>"
                    f"<td style='color:{col}'><b>{mark} {esc(c.verdict.replace('_', ' '))}</b></td>"
                    f"<td>{esc(_fmt_error(c.max_error))}</td><td><code>{esc(c.first_wrong)}</code></td>"
                    f"<td style='font-size:smaller'>{esc('' if c.passed else c.message)}</td></tr>")
            parts.append("<table><tr><th></th><th>case</th><th>what it tests</th><th>verdict</th>"
                         "<th>max error</th><th>first wrong</th><th>details</th></tr>" + "".join(rows) + "</table>")
        if self.perf is not None:
            col = "green" if self.perf.verdict == V.PASSED else ("gray" if self.perf.verdict == V.NOT_MEASURED
                                                                 else "crimson")
            text = f"<b style='color:{col}'>performance: {esc(self.perf.verdict.replace('_', ' '))}</b> &#8212; " \
                   f"{esc(self.perf.summary())}"
            if self.perf.size:
                text += f" <span style='font-size:smaller'>(case {esc(self.perf.size)})</span>"
            if self.perf.intensity is not None:
                text += f"<br>roofline: {esc(_roofline_text(self.perf))}"
            parts.append(f"<p>{text}</p>")
        if self.answers:
            rows = []
            for a in self.answers:
                ok = a.verdict == V.PASSED
                exp = f" (expected {a.expected!r})" if self.show_expected and not ok else ""
                rows.append(f"<tr><td><code>{esc(a.key)}</code></td><td>{esc(a.text)}</td>"
                            f"<td><code>{esc(repr(a.given))}</code></td><td style='color:{'green' if ok else 'crimson'}'>"
                            f"<b>{'&#10004;' if ok else '&#10008;'} {esc(a.verdict.replace('_', ' '))}{esc(exp)}</b>"
                            f"</td></tr>")
            parts.append("<table><tr><th>key</th><th>question</th><th>your answer</th><th>verdict</th></tr>"
                         + "".join(rows) + "</table>")
        if self.measured:
            rows = "".join(f"<tr><td>{esc(m.label)}</td><td>{esc(_fmt_any(m.predicted))}</td>"
                           f"<td>{esc(_fmt_any(m.measured))}</td><td>{esc(m.note)}</td></tr>" for m in self.measured)
            parts.append("<table><tr><th>measured on this GPU</th><th>your prediction</th><th>measured</th>"
                         f"<th></th></tr>{rows}</table>")
        if self.measure_note:
            parts.append(f"<p style='color:gray'>{esc(self.measure_note)}</p>")
        for n in self.notes:
            parts.append(f"<p style='font-size:smaller'>{esc(n)}</p>")
        if self.feedback:
            items = "".join(f"<li>{esc(f)}</li>" for f in self.feedback)
            parts.append("<p style='font-size:smaller'><b>Memory traffic</b> (not graded; recorded on the CPU "
                         f"backend, as Nsight Compute would count it):</p><ul style='font-size:smaller'>{items}</ul>")
        return "\n".join(parts)


def _fmt_error(v: float | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.2e}" if v else "0"


def _fmt_any(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def _roofline_text(p: PerfResult) -> str:
    return (f"intensity {p.intensity:.3g} FLOP/byte, roof {p.attainable_tflops:.3g} TFLOP/s at that "
            f"intensity, achieved {p.achieved_tflops:.3g} TFLOP/s "
            f"({100 * p.achieved_tflops / p.attainable_tflops:.0f} % of the roof)")
