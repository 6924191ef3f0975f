"""A recorded explorer: measurements shown as a self-contained HTML + JavaScript figure.

The website has no kernel, so a live widget cannot re-measure there. What it can do is replay what
was measured when the notebook ran on a GPU: the records are embedded in the page and a few lines of
plain JavaScript let the reader move the same sliders over them. No library, no CDN, no network.

The drawing code lives here once, in :data:`_RENDERER_JS`. A notebook output carries it inline (so
the figure works in Jupyter and Colab); the website also loads it as ``book/_static/course-explorer.js``
(written by ``python -m kernels.explorer``), which redraws every explorer on a page with this
version of the renderer and these axis labels, so a recorded output made by an older version still
shows today's figure without re-running its notebook.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Explorer", "HtmlFragment", "FIELD_LABELS", "SERIES_COLORS", "decode_columns", "encode_columns",
           "field_label", "site_script"]

# Axis, slider and readout labels for the field names the chapters' sweeps record: words with units.
# A field not listed here is shown under its own name (choose names that read as words).
FIELD_LABELS: dict[str, str] = {
    "GB/s": "bandwidth (GB/s)",
    "GFLOP/s": "throughput (GFLOP/s)",
    "TFLOP/s": "throughput (TFLOP/s)",
    "size_mib": "working set (MiB)",
    "working_set_kib": "working set (KiB)",
    "working_set_mib": "working set (MiB)",
    "ns_per_load": "latency per load (ns)",
    "cycles_per_load": "latency per load (cycles)",
    "ns_per_warp_load": "time per warp-wide load (ns)",
    "conflict_degree": "bank-conflict degree (ways)",
    "time_us": "time (µs)",
    "time_ms": "time (ms)",
    "IQR_%": "spread of the repeats (IQR, %)",
    "µs per kernel": "wall time per kernel (µs)",
    "GPU µs per kernel": "GPU time per kernel (µs)",
    "capture + instantiate ms": "capture + instantiate (ms)",
    "chain": "kernels in the chain",
    "chunks": "chunks per transfer",
    "streams": "streams",
    "speedup": "speedup over serial (×)",
    "bytes_per_load": "bytes per load instruction (B)",
    "loads_in_flight": "loads in flight per thread",
    "offset_floats": "start offset (floats)",
    "per_thread": "elements per thread",
    "warps_per_sm": "resident warps per SM",
    "threads": "threads per block",
    "block": "threads per block",
    "items": "items per thread",
    "work": "work per branch (steps)",
    "distinct": "distinct words per warp load",
    "stride": "stride between lanes (words)",
    "s": "stride or offset (floats)",
    "k": "FMAs per element",
    "R": "extra registers per thread",
    "cols": "row length (floats)",
    "rows": "rows",
    "elements": "elements (floats)",
    "BK": "BK, tile depth along k (elements)",
    "reps": "re-reads",
    "block_cols": "tile width BN (columns of C)",
    "stages": "pipeline stages",
    "cluster": "blocks per cluster",
    "% of cuBLAS": "share of cuBLAS, same run (%)",
    "time us": "time, L2 flushed (µs)",
    "b2b us": "time, back to back (µs)",
    "smem KB": "shared memory per block (KB)",
}

# Series whose matplotlib twin on the same page draws them in a fixed colour: the explorer uses the
# same colour for the same series (the launch-overhead figure of the asynchrony chapter sorts its
# series by name and takes matplotlib's default colours in that order).
SERIES_COLORS: dict[str, str] = {
    "graph": "#1f77b4",
    "stream": "#ff7f0e",
    "stream, raw CuPy": "#2ca02c",
}

# matplotlib's default colour cycle (tab10), so the n-th series has the n-th colour of a plain
# matplotlib figure of the same records.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def field_label(field: str) -> str:
    """The words (with units) that name a recorded field on an axis, a slider or in the readout."""
    return FIELD_LABELS.get(field, field)


class HtmlFragment(str):
    """A string of HTML that notebooks render as HTML (and tests can treat as a plain string)."""

    def _repr_html_(self) -> str:
        return str(self)


def _clean(value: Any) -> Any:
    """Make a value JSON-safe: NaN/inf become null, NumPy scalars become Python numbers."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()  # NumPy scalar
        if not isinstance(value, float):
            return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else float(f"{value:.6g}")
    return str(value)


def _delta_runs(codes: Sequence[int]) -> list[int]:
    """Run-length encoded differences: a grid column such as 32, 64, ..., 1024 repeated collapses to
    a handful of numbers. Flat list of (delta, count) pairs."""
    runs: list[int] = []
    previous = 0
    for code in codes:
        delta = code - previous
        previous = code
        if runs and runs[-2] == delta:
            runs[-1] += 1
        else:
            runs += [delta, 1]
    return runs


def encode_columns(records: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, Any]:
    """Column-oriented JSON data, compressed because a sweep repeats few distinct values many times.

    Each column is the shortest of: a plain list; ``{"d": distinct, "i": indices}``; or
    ``{"d": distinct, "r": delta_runs_of_indices}``. A 14 000-point occupancy grid stays well under
    300 KB this way, and the page needs no decompression library.
    """
    columns: dict[str, Any] = {}
    for field in fields:
        values = [_clean(r.get(field)) for r in records]
        distinct: list[Any] = []
        index: dict[str, int] = {}
        codes: list[int] = []
        for v in values:
            key = json.dumps(v)
            if key not in index:
                index[key] = len(distinct)
                distinct.append(v)
            codes.append(index[key])
        candidates = [values, {"d": distinct, "i": codes}, {"d": distinct, "r": _delta_runs(codes)}]
        columns[field] = min(candidates, key=lambda c: len(json.dumps(c, separators=(",", ":"))))
    return {"n": len(records), "cols": columns}


def decode_columns(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Inverse of :func:`encode_columns` (missing values come back as None)."""
    cols: dict[str, list[Any]] = {}
    for field, col in data["cols"].items():
        if isinstance(col, dict) and "r" in col:
            codes, code, runs = [], 0, col["r"]
            for delta, count in zip(runs[::2], runs[1::2]):
                for _ in range(count):
                    code += delta
                    codes.append(code)
            cols[field] = [col["d"][i] for i in codes]
        elif isinstance(col, dict):
            cols[field] = [col["d"][i] for i in col["i"]]
        else:
            cols[field] = list(col)
    return [{f: cols[f][k] for f in cols} for k in range(data["n"])]


def _distinct_sorted(values: Sequence[Any]) -> list[Any]:
    """Distinct values, numbers ascending, then anything else in first-seen order."""
    seen: list[Any] = []
    for v in values:
        if v is not None and v not in seen:
            seen.append(v)
    numbers = sorted(v for v in seen if isinstance(v, (int, float)) and not isinstance(v, bool))
    others = [v for v in seen if not (isinstance(v, (int, float)) and not isinstance(v, bool))]
    return numbers + others


class Explorer:
    """Recorded measurements as an interactive figure that needs no kernel: y against x, one slider
    per control field, one line per ``series`` value, reference lines and a readout.

    Sliders only reach settings that were recorded: moving one to a combination of controls with no
    record moves the others to the nearest recorded combination."""

    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        x: str,
        y: str,
        controls: Sequence[str] = (),
        series: str | None = None,
        title: str = "",
        xlabel: str | None = None,
        ylabel: str | None = None,
        log_x: bool = False,
        log_y: bool = False,
        hlines: Mapping[str, float] | None = None,
        readout: Sequence[str] = (),
        height: int = 320,
        initial: Mapping[str, Any] | None = None,
        caption: str = "Recorded measurements; run the notebook on a GPU to measure live.",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.records = [dict(r) for r in records]
        self.caption = caption
        self.x, self.y = x, y
        self.controls = [c for c in controls if c not in (x, series)]
        self.series = series
        self.title = title
        self.labels = dict(labels or {})
        self.xlabel = xlabel if xlabel is not None else self.label(x)
        self.ylabel = ylabel if ylabel is not None else self.label(y)
        self.log_x, self.log_y = bool(log_x), bool(log_y)
        self.hlines = {str(k): float(v) for k, v in (hlines or {}).items()}
        self.readout = list(readout)
        self.height = int(height)
        self.initial = dict(initial or {})
        self.id = "course-explorer-" + uuid.uuid4().hex[:12]

    def label(self, field: str) -> str:
        """How the figure names a field: this explorer's own label, else :func:`field_label`."""
        return self.labels.get(field, field_label(field))

    @property
    def fields(self) -> list[str]:
        """Every field the figure needs, in a stable order (``note`` explains a missing y)."""
        wanted = [self.x, self.y, *self.controls, *([self.series] if self.series else []), *self.readout]
        if any("note" in r for r in self.records):
            wanted.append("note")
        return list(dict.fromkeys(wanted))

    def values(self, field: str) -> list[Any]:
        """Distinct sorted values of one field: what its slider steps over."""
        return _distinct_sorted([_clean(r.get(field)) for r in self.records])

    def recorded_settings(self) -> list[tuple[Any, ...]]:
        """The combinations of control values that have at least one record: the only slider
        settings the figure shows (each draws a line, or marks saying why a point has no value)."""
        return list(dict.fromkeys(tuple(_clean(r.get(f)) for f in self.controls) for r in self.records))

    def _start_index(self, field: str) -> int:
        values = self.values(field)
        if field in self.initial:
            want = _clean(self.initial[field])
            if want in values:
                return values.index(want)
            numeric = [v for v in values if isinstance(v, (int, float))]
            if numeric and isinstance(want, (int, float)):
                return values.index(min(numeric, key=lambda v: abs(v - want)))
        return 0

    def payload(self) -> dict[str, Any]:
        """Config and data exactly as embedded in the page."""
        labels = {f: self.label(f) for f in self.fields if f != "note"}
        labels.update({self.x: self.xlabel, self.y: self.ylabel})
        series_values = self.values(self.series) if self.series else []
        config = {
            "x": self.x, "y": self.y, "controls": self.controls, "series": self.series,
            "title": self.title, "xlabel": self.xlabel, "ylabel": self.ylabel, "labels": labels,
            "colors": {str(v): SERIES_COLORS[str(v)] for v in series_values if str(v) in SERIES_COLORS},
            "logX": self.log_x, "logY": self.log_y, "readout": self.readout,
            "hlines": [[k, v] for k, v in self.hlines.items()], "height": self.height,
            "start": {f: self._start_index(f) for f in [*self.controls, self.x]},
        }
        return {"config": config, "data": encode_columns(self.records, self.fields)}

    def html(self) -> HtmlFragment:
        """The self-contained fragment: embedded JSON, the title and caption, and the script that
        draws the plot, the sliders, the legend and the readout."""
        self.id = "course-explorer-" + uuid.uuid4().hex[:12]  # fresh per call: the same figure may be shown twice
        data = json.dumps(self.payload(), separators=(",", ":"), allow_nan=False)
        data = data.replace("<", "\\u003c")  # valid JSON, and no "</script>" or "<!--" inside the script element
        title = f'<div class="course-explorer-title">{_esc(self.title)}</div>' if self.title else ""
        return HtmlFragment(
            f'<div class="course-explorer" id="{self.id}" data-x="{_esc(self.x)}" data-y="{_esc(self.y)}" '
            f'style="font-family:sans-serif;font-size:13px;max-width:760px;border:1px solid #ddd;'
            f'border-radius:6px;padding:8px;margin:8px 0;box-sizing:border-box">'
            f"{title}"
            f'<div class="course-explorer-caption" style="color:#777;font-size:11px">'
            f"{html.escape(self.caption)}</div>"
            f'<script type="application/json" class="course-explorer-data">{data}</script>'
            f"<script>(function(){{{_RENDERER_JS}\nrender(document.getElementById(\"{self.id}\"), {{}});}})();</script>"
            f"</div>"
        )

    def _repr_html_(self) -> str:
        return str(self.html())


def _esc(text: Any) -> str:
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def site_script() -> str:
    """book/_static/course-explorer.js: redraws every explorer of a page with this renderer, these
    labels and these colours, including explorers recorded by an older version of this module."""
    labels = json.dumps(FIELD_LABELS, sort_keys=True)
    colors = json.dumps(SERIES_COLORS, sort_keys=True)
    return (
        "/* Generated by `python -m kernels.explorer` from kernels/explorer.py: do not edit by hand.\n"
        " * Redraws the recorded explorers of a page with the current renderer (see that module). */\n"
        "(function(){\n\"use strict\";\n"
        f"{_RENDERER_JS}\n"
        f"var LABELS={labels}, COLORS_BY_SERIES={colors};\n"
        "function all(){var roots=document.querySelectorAll(\"div.course-explorer\"),widths=[],j,s;\n"
        "/* every width first, in one layout of the page, then every drawing */\n"
        "for(j=0;j<roots.length;j++){s=getComputedStyle(roots[j]);"
        "widths.push(roots[j].clientWidth-parseFloat(s.paddingLeft)-parseFloat(s.paddingRight));}\n"
        "for(j=0;j<roots.length;j++){try{render(roots[j],{labels:LABELS,colors:COLORS_BY_SERIES},widths[j]);}"
        "catch(e){if(window.console)console.warn(\"explorer not redrawn: \"+e);}}\n"
        "gpuSwitches(roots,widths);}\n"
        f"{_GPU_SWITCH_JS}\n"
        "if(document.readyState===\"loading\")document.addEventListener(\"DOMContentLoaded\",all);else all();\n"
        "})();\n"
    )


# The website's GPU switch: a chapter run on other GPUs too carries their explorer data in
# <script id="course-runs"> (book/_ext/course_site.py); each explorer with a twin in another run gets
# a row of buttons above it that redraws it from that run's data.
_GPU_SWITCH_JS = r"""
function gpuSwitches(roots, widths){
var el=document.getElementById("course-runs"); if(!el) return;
var R; try{R=JSON.parse(el.textContent);}catch(e){return;}
function name(run){return run.gpu+(run.date?" ("+run.date+")":"");}
roots.forEach(function(root,j){
 var data=root.querySelector("script.course-explorer-data"); if(!data) return;
 /* the caption names the GPU it was recorded on: each run's caption names that run's GPU */
 var cap=root.querySelector(".course-explorer-caption"), said=cap?cap.textContent:"";
 function captionFor(run){return R.main.gpu?said.split(R.main.gpu).join(run.gpu):said;}
 var choices=[{label:name(R.main),text:data.textContent,caption:said}];
 (R.runs||[]).forEach(function(run){var p=run.explorers&&run.explorers[j];
  if(p) choices.push({label:name(run),text:JSON.stringify(p),caption:captionFor(run)});});
 if(choices.length<2) return;
 var bar=document.createElement("div"); bar.className="course-explorer-gpus";
 bar.setAttribute("style","font-family:sans-serif;font-size:12px;margin:8px 0 2px;display:flex;flex-wrap:wrap;gap:4px;align-items:center");
 var lead=document.createElement("span"); lead.textContent="Recorded on:"; bar.appendChild(lead);
 var buttons=choices.map(function(c,k){var b=document.createElement("button"); b.type="button";
  b.textContent=c.label; b.setAttribute("aria-pressed",k===0?"true":"false");
  b.setAttribute("style","font-size:12px;padding:1px 8px;border:1px solid #888;border-radius:4px;cursor:pointer");
  b.addEventListener("click",function(){data.textContent=c.text; if(cap)cap.textContent=c.caption;
   root.removeAttribute("data-renderer");
   render(root,{labels:LABELS,colors:COLORS_BY_SERIES},widths[j]);
   buttons.forEach(function(o,m){o.setAttribute("aria-pressed",m===k?"true":"false");
    o.style.background=m===k?"#dde7f5":"";});});
  b.style.background=k===0?"#dde7f5":""; bar.appendChild(b); return b;});
 root.parentNode.insertBefore(bar,root);});
}
"""


# ES5 on purpose: it runs in whatever browser opens the website, with no build step.
# render(root, defaults, width) draws one explorer from the JSON in its data script. ``defaults`` holds
# the labels and series colours the site knows (for explorers recorded before the config carried
# them); ``width``, when known, is the plot's width in CSS pixels (else it is measured).
_RENDERER_JS = r"""
function render(root, defaults, width){
if(!root) return;
var VERSION="__VERSION__";
if(root.getAttribute("data-renderer")===VERSION) return;
var P=JSON.parse(root.querySelector("script.course-explorer-data").textContent);
var C=P.config, D=P.data, NS="http://www.w3.org/2000/svg", i, j, k;
var PALETTE=__PALETTE__;
var LAB=C.labels||{}, DEF=(defaults&&defaults.labels)||{}, CC=C.colors||{}, DC=(defaults&&defaults.colors)||{};
function lab(f){return LAB[f]||DEF[f]||f;}
var XL=(C.xlabel&&C.xlabel!==C.x)?C.xlabel:lab(C.x), YL=(C.ylabel&&C.ylabel!==C.y)?C.ylabel:lab(C.y);
/* rebuild everything but the data, the scripts and the caption: an older recording's markup goes */
var caption=root.querySelector(".course-explorer-caption"), old=[];
for(i=0;i<root.childNodes.length;i++){var ch=root.childNodes[i];
 if(!(ch.nodeType===1&&(ch.tagName==="SCRIPT"||ch===caption)))old.push(ch);}
for(i=0;i<old.length;i++)root.removeChild(old[i]);
var anchor=caption||root.querySelector("script");
function add(tag,cls,style){var e=document.createElement(tag);if(cls)e.className=cls;if(style)e.setAttribute("style",style);
 root.insertBefore(e,anchor);return e;}
root.style.maxWidth="760px"; root.style.boxSizing="border-box";
if(C.title){add("div","course-explorer-title","font-weight:600;margin-bottom:4px").textContent=C.title;}
var svg=document.createElementNS(NS,"svg");
svg.setAttribute("class","course-explorer-plot"); svg.setAttribute("width","100%");
svg.setAttribute("role","img"); svg.setAttribute("style","display:block");
root.insertBefore(svg,anchor);
var legend=add("div","course-explorer-legend","display:flex;flex-wrap:wrap;gap:2px 12px;margin:4px 0");
var controls=add("div","course-explorer-controls","display:flex;flex-wrap:wrap;gap:4px 18px");
var readout=add("div","course-explorer-readout","margin-top:6px;font-family:monospace;font-size:12px;overflow-wrap:anywhere");
function col(f){var c=D.cols[f],o=[],q;if(!c){for(q=0;q<D.n;q++)o.push(null);return o;}
 if(c.r){var code=0;for(q=0;q<c.r.length;q+=2)for(var m=0;m<c.r[q+1];m++){code+=c.r[q];o.push(c.d[code]);}return o;}
 if(c.d){for(q=0;q<c.i.length;q++)o.push(c.d[c.i[q]]);return o;} return c;}
var cols={}; for(var f in D.cols) cols[f]=col(f);
function distinct(f){var v=cols[f]||[],s=[],seen={};for(var q=0;q<v.length;q++){var a=v[q];if(a===null)continue;
 var key=typeof a+":"+a;if(!seen[key]){seen[key]=1;s.push(a);}}
 var nums=[],oth=[];for(var t=0;t<s.length;t++)(typeof s[t]==="number"?nums:oth).push(s[t]);
 nums.sort(function(p,q2){return p-q2;});return nums.concat(oth);}
function isnum(v){return typeof v==="number"&&isFinite(v);}
function trim(s){return (s.indexOf(".")>=0&&s.indexOf("e")<0)?s.replace(/0+$/,"").replace(/\.$/,""):s;}
function fmt(v){if(v===null||v===undefined)return "\u2014";if(typeof v!=="number")return String(v);
 var a=Math.abs(v);if(a>=1e9)return trim((v/1e9).toPrecision(3))+"G";if(a>=1e6)return trim((v/1e6).toPrecision(3))+"M";
 if(a>=1e4)return trim((v/1e3).toPrecision(3))+"k";if(a>=100||v===Math.round(v))return String(Math.round(v));return trim(v.toPrecision(3));}
function esc(s){return String(s).replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;");}
function el(name,attrs,text){var e=document.createElementNS(NS,name);for(var a in attrs)e.setAttribute(a,attrs[a]);
 if(text!==undefined)e.appendChild(document.createTextNode(text));return e;}
var xs=distinct(C.x), ys=cols[C.y]||[], X=cols[C.x];
var cvals={}; for(i=0;i<C.controls.length;i++) cvals[C.controls[i]]=distinct(C.controls[i]);
var series=C.series?distinct(C.series):[null];
/* sliders: one per control, one for the selected x */
function slider(field,n,start,isPoint){
 var l=document.createElement("label");l.className="course-explorer-control"+(isPoint?" course-explorer-point":"");
 l.setAttribute("style","display:inline-flex;align-items:center;gap:6px;white-space:nowrap");
 l.appendChild(document.createTextNode(isPoint?XL:lab(field)));
 var s=document.createElement("input");s.type="range";s.min=0;s.max=Math.max(n-1,0);s.step=1;s.value=start||0;
 s.setAttribute(isPoint?"data-point":"data-control",field);s.setAttribute("aria-label",isPoint?XL:lab(field));
 s.setAttribute("style","max-width:140px");
 var o=document.createElement("output");o.className="course-explorer-value";o.setAttribute("data-for",field);
 l.appendChild(s);l.appendChild(o);controls.appendChild(l);return s;}
var start=C.start||{}, csl={};
for(i=0;i<C.controls.length;i++){var cf=C.controls[i];csl[cf]=slider(cf,cvals[cf].length,start[cf],false);}
var psl=slider(C.x,xs.length,start[C.x],true);
function current(f){return cvals[f][+csl[f].value];}
function selectedX(){return xs[+psl.value];}
/* the recorded combinations of control values: sliders snap to the nearest one */
var recorded={}, recKeys=[];
for(k=0;k<D.n;k++){var idx=[];for(j=0;j<C.controls.length;j++){var cf2=C.controls[j];idx.push(cvals[cf2].indexOf(cols[cf2][k]));}
 var key=idx.join(",");if(!recorded[key]){recorded[key]=idx;recKeys.push(key);}}
function snap(moved){if(!C.controls.length)return;
 var cur=[];for(j=0;j<C.controls.length;j++)cur.push(+csl[C.controls[j]].value);
 if(recorded[cur.join(",")])return;
 var best=null,bd=Infinity;
 for(var r=0;r<recKeys.length;r++){var cand=recorded[recKeys[r]],d=0;
  for(j=0;j<cand.length;j++)d+=(C.controls[j]===moved?1000:1)*Math.abs(cand[j]-cur[j]);
  if(d<bd){bd=d;best=cand;}}
 if(best)for(j=0;j<best.length;j++)csl[C.controls[j]].value=best[j];}
/* scales */
function tr(v,lg){return lg?(v>0?Math.log(v)/Math.LN10:null):v;}
function range(vals,lg){var lo=Infinity,hi=-Infinity;for(var q=0;q<vals.length;q++){var t=tr(vals[q],lg);
 if(t!==null&&isFinite(t)){if(t<lo)lo=t;if(t>hi)hi=t;}}if(lo===Infinity){lo=0;hi=1;}if(lo===hi){lo-=0.5;hi+=0.5;}return [lo,hi];}
var xnum=[];for(i=0;i<xs.length;i++)if(isnum(xs[i]))xnum.push(xs[i]);
var categorical=xnum.length<xs.length;
var xr=categorical?[-0.3,Math.max(xs.length-1,1)+0.3]:range(xnum,C.logX);
if(!categorical){var xp=(xr[1]-xr[0])*0.03;xr=[xr[0]-xp,xr[1]+xp];}
var yall=[];for(i=0;i<ys.length;i++)if(isnum(ys[i]))yall.push(ys[i]);
for(i=0;i<C.hlines.length;i++)yall.push(C.hlines[i][1]);
if(!C.logY)yall.push(0);
var yr=range(yall,C.logY);
if(C.logY){var yp=(yr[1]-yr[0])*0.06;yr=[yr[0]-yp,yr[1]+yp];}else yr[1]+=(yr[1]-yr[0])*0.08;
var W=720,H=C.height,L=58,R=W-12,T=12,B=H-40;
function layout(w){W=Math.max(300,Math.min(720,Math.round(w||720)));
 H=Math.round(C.height*Math.max(0.72,Math.min(1,W/720)));R=W-12;B=H-40;
 svg.setAttribute("viewBox","0 0 "+W+" "+H);svg.setAttribute("height",H);}
function px(v){var t=categorical?xs.indexOf(v):tr(v,C.logX);return L+(t-xr[0])/(xr[1]-xr[0])*(R-L);}
function py(v){var t=tr(v,C.logY);return B-(t-yr[0])/(yr[1]-yr[0])*(B-T);}
function niceTicks(lo,hi,count){var span=hi-lo,raw=span/count,mag=Math.pow(10,Math.floor(Math.log(raw)/Math.LN10)),n=raw/mag;
 var step=(n<1.5?1:n<3?2:n<7?5:10)*mag,out=[];for(var v=Math.ceil(lo/step)*step;v<=hi+1e-9*span;v+=step)out.push(Math.abs(v)<1e-12*span?0:v);return out;}
function logTicks(r){var span=r[1]-r[0],mult=span<1.3?[1,2,5]:span<2.6?[1,3]:[1],out=[];
 var every=span>8?2:1;
 for(var e=Math.floor(r[0]);e<=Math.ceil(r[1]);e++){if(((e%every)+every)%every)continue;
  for(var m=0;m<mult.length;m++){var v=mult[m]*Math.pow(10,e),t=Math.log(v)/Math.LN10;if(t>=r[0]-1e-9&&t<=r[1]+1e-9)out.push(v);}}
 if(out.length<2)out=niceTicks(Math.pow(10,r[0]),Math.pow(10,r[1]),4).filter(function(v){return v>0;});
 return out;}
function xTicks(){if(categorical||xs.length<=12)return xs.slice();   /* few recorded x: tick exactly those */
 if(C.logX)return logTicks(xr);return niceTicks(xr[0],xr[1],Math.max(3,Math.round((R-L)/90)));}
function yTicks(){if(C.logY)return logTicks(yr);return niceTicks(yr[0],yr[1],Math.max(3,Math.round((B-T)/45)));}
/* labels must not collide: a tick label is dropped when it would touch the one before it */
var CHAR=6.4;
function drawAxes(){
 var xt=xTicks(),yt=yTicks(),lastRight=-Infinity,lastY=Infinity,t,txt;
 for(j=0;j<xt.length;j++){t=px(xt[j]);if(t<L-1||t>R+1)continue;txt=fmt(xt[j]);var half=txt.length*CHAR/2+3;
  svg.appendChild(el("line",{x1:t,x2:t,y1:T,y2:B,stroke:"#eee"}));
  if(t-half<lastRight)continue;lastRight=t+half;
  svg.appendChild(el("text",{x:t,y:B+14,"text-anchor":"middle","font-size":11,fill:"#444","class":"course-explorer-tick course-explorer-xtick"},txt));}
 for(j=0;j<yt.length;j++){t=py(yt[j]);if(t<T-1||t>B+1)continue;
  svg.appendChild(el("line",{x1:L,x2:R,y1:t,y2:t,stroke:"#eee"}));
  if(lastY-t<13)continue;lastY=t;
  svg.appendChild(el("text",{x:L-5,y:t+4,"text-anchor":"end","font-size":11,fill:"#444","class":"course-explorer-tick course-explorer-ytick"},fmt(yt[j])));}
 svg.appendChild(el("text",{x:(L+R)/2,y:H-8,"text-anchor":"middle","font-size":12,"class":"course-explorer-xlabel"},XL+(C.logX?", log scale":"")));
 svg.appendChild(el("text",{x:13,y:(T+B)/2,"text-anchor":"middle","font-size":12,"class":"course-explorer-ylabel",
  transform:"rotate(-90 13 "+((T+B)/2)+")"},YL+(C.logY?", log scale":"")));}
/* reference lines, labelled inside the plot at the right; labels pushed apart so none overlap */
function drawHlines(){var items=[];
 for(j=0;j<C.hlines.length;j++){var hv=C.hlines[j][1];if(C.logY&&hv<=0)continue;var t=py(hv);
  svg.insertBefore(el("line",{x1:L,x2:R,y1:t,y2:t,stroke:"#555","stroke-dasharray":"6 4","class":"course-explorer-hline"}),svg.childNodes[1]);
  items.push({y:t-4,text:C.hlines[j][0]+" "+fmt(hv)});}
 items.sort(function(a,b){return a.y-b.y;});
 for(j=0;j<items.length;j++){if(items[j].y<T+10)items[j].y=T+10;if(j&&items[j].y<items[j-1].y+13)items[j].y=items[j-1].y+13;}
 for(j=0;j<items.length;j++)svg.appendChild(el("text",{x:R-4,y:items[j].y,"text-anchor":"end","font-size":11,fill:"#333",
  stroke:"#fff","stroke-width":4,"stroke-linejoin":"round","paint-order":"stroke","class":"course-explorer-hline-label"},items[j].text));}
function color(s){var name=String(series[s]);return CC[name]||DC[name]||PALETTE[s%PALETTE.length];}
function draw(){
 while(svg.firstChild)svg.removeChild(svg.firstChild);
 svg.appendChild(el("rect",{x:L,y:T,width:R-L,height:B-T,fill:"#fff",stroke:"#999"}));
 drawAxes();
 var cur={};for(j=0;j<C.controls.length;j++)cur[C.controls[j]]=current(C.controls[j]);
 var keep=[];for(k=0;k<D.n;k++){var ok=true;for(j=0;j<C.controls.length;j++){var f2=C.controls[j];if(cols[f2][k]!==cur[f2]){ok=false;break;}}if(ok)keep.push(k);}
 var sx=selectedX(),picked=[],lh=[],untimed=0,layer=el("g",{}),t;
 for(var s=0;s<series.length;s++){
  var rows=[];for(j=0;j<keep.length;j++){k=keep[j];if(!C.series||cols[C.series][k]===series[s])rows.push(k);}
  rows.sort(function(p,q){return categorical?xs.indexOf(X[p])-xs.indexOf(X[q]):X[p]-X[q];});
  var d="",pen=false,c=color(s),yv;
  for(j=0;j<rows.length;j++){k=rows[j];yv=ys[k];
   if(!isnum(yv)||(C.logY&&yv<=0)||(C.logX&&!categorical&&!(X[k]>0))){pen=false;continue;}
   d+=(pen?"L":"M")+px(X[k]).toFixed(1)+" "+py(yv).toFixed(1);pen=true;}
  if(d)layer.appendChild(el("path",{d:d,fill:"none",stroke:c,"stroke-width":2,"class":"course-explorer-line","data-series":String(series[s])}));
  for(j=0;j<rows.length;j++){k=rows[j];yv=ys[k];if(!isnum(yv)||(C.logY&&yv<=0))continue;var sel=X[k]===sx;
   layer.appendChild(el("circle",{cx:px(X[k]).toFixed(1),cy:py(yv).toFixed(1),r:sel?5.5:2.5,fill:sel?"#fff":c,stroke:c,"stroke-width":sel?2.5:1,"class":sel?"course-explorer-selected":"course-explorer-point"}));}
  for(j=0;j<rows.length;j++){k=rows[j];if(isnum(ys[k])||!(cols.note&&cols.note[k]))continue;
   if(!categorical&&!(isnum(X[k])&&(!C.logX||X[k]>0)))continue;
   var mx=px(X[k]),my=B-7,mark=el("g",{"class":"course-explorer-untimed","data-series":String(series[s])});
   mark.appendChild(el("title",{},lab(C.x)+" = "+fmt(X[k])+": "+cols.note[k]));
   mark.appendChild(el("path",{d:"M"+(mx-4)+" "+(my-4)+"L"+(mx+4)+" "+(my+4)+"M"+(mx-4)+" "+(my+4)+"L"+(mx+4)+" "+(my-4),stroke:c,"stroke-width":2}));
   layer.appendChild(mark);untimed++;}
  for(j=0;j<rows.length;j++)if(X[rows[j]]===sx)picked.push(rows[j]);
  if(C.series)lh.push('<span><span style="display:inline-block;width:14px;height:3px;background:'+c+';vertical-align:middle;margin-right:4px"></span>'+esc(lab(C.series)+" = "+fmt(series[s]))+"</span>");
 }
 if(sx!==undefined&&(categorical||isnum(sx))){t=px(sx);svg.appendChild(el("line",{x1:t,x2:t,y1:T,y2:B,stroke:"#bbb","stroke-dasharray":"2 3"}));}
 svg.appendChild(layer);
 drawHlines();   /* on top of the data, each label on a white halo */
 if(untimed)lh.push("<span>\u00d7 no value (hover over it for the reason)</span>");
 legend.innerHTML=lh.join("");
 var lines=[];
 for(j=0;j<picked.length;j++){k=picked[j];var parts=[];
  if(C.series)parts.push(lab(C.series)+" = "+fmt(cols[C.series][k]));
  parts.push(lab(C.x)+" = "+fmt(X[k]));
  if(isnum(ys[k])){parts.push(lab(C.y)+" = "+fmt(ys[k]));for(var q=0;q<C.readout.length;q++){var rf=C.readout[q];if(rf!==C.y&&rf!==C.x)parts.push(lab(rf)+" = "+fmt(cols[rf][k]));}}
  else parts.push(lab(C.y)+": no value ("+((cols.note&&cols.note[k])||"not measured")+")");
  lines.push(esc(parts.join(", ")));}
 if(!lines.length)lines.push(esc(lab(C.x)+" = "+fmt(sx)+": nothing recorded for these settings"));
 readout.innerHTML=lines.join("<br>");
 for(j=0;j<C.controls.length;j++){var o=controls.querySelector('output[data-for="'+C.controls[j]+'"]');if(o)o.textContent=fmt(current(C.controls[j]));}
 var po=controls.querySelector('output[data-for="'+C.x+'"]');if(po)po.textContent=fmt(selectedX());
}
function onControl(ev){snap(ev.target.getAttribute("data-control"));draw();}
for(i=0;i<C.controls.length;i++){csl[C.controls[i]].addEventListener("input",onControl);csl[C.controls[i]].addEventListener("change",onControl);}
psl.addEventListener("input",draw);psl.addEventListener("change",draw);
svg.addEventListener("click",function(ev){var box=svg.getBoundingClientRect();if(!box.width)return;
 var vx=(ev.clientX-box.left)*W/box.width,best=0,bd=Infinity;
 for(var q=0;q<xs.length;q++){var dd=Math.abs(px(xs[q])-vx);if(dd<bd){bd=dd;best=q;}}
 psl.value=best;draw();});
var lastWidth=-1;
function redraw(w){w=Math.round(w);if(w===lastWidth)return;lastWidth=w;layout(w);draw();}
window.addEventListener("resize",function(){redraw(svg.getBoundingClientRect().width);});
root.setAttribute("data-renderer",VERSION);
snap(null);redraw(width>0?width:(svg.getBoundingClientRect().width||720));   /* hidden (a closed dropdown): full size */
}
"""
_RENDERER_JS = _RENDERER_JS.replace("__PALETTE__", json.dumps(list(PALETTE)))
_RENDERER_JS = _RENDERER_JS.replace("__VERSION__", hashlib.sha1(_RENDERER_JS.encode()).hexdigest()[:10])


def _main(argv: Sequence[str]) -> int:
    """``python -m kernels.explorer PATH`` writes :func:`site_script` to PATH (the website's copy)."""
    if len(argv) != 1:
        print("usage: python -m kernels.explorer book/_static/course-explorer.js", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(site_script(), encoding="utf-8")
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
