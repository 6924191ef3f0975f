"""All graded exercises, by id ("<chapter>/<name>"), collected from ``kernels/grading/exercises/``."""
from __future__ import annotations

import difflib
import functools
import importlib

from .spec import Exercise

#: Chapter modules in course order; each defines EXERCISES, a list of Exercise.
CHAPTERS = ("gpu_architecture", "measuring_kernels", "simt_and_warps", "memory_hierarchy", "dram_bursts",
            "coalescing", "reduce", "scan", "asynchrony", "gemm", "hopper", "softmax")


class UnknownExerciseError(KeyError):
    """No exercise has that id; the message suggests the closest ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@functools.cache
def all_exercises() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for chapter in CHAPTERS:
        module = importlib.import_module(f"{__package__}.exercises.{chapter}")
        for ex in module.EXERCISES:
            if ex.chapter != chapter:
                raise ValueError(f"exercise {ex.id} is defined in the module of chapter {chapter}")
            if ex.id in found:
                raise ValueError(f"two exercises have the id {ex.id}")
            found[ex.id] = ex
    return found


def exercise_ids() -> list[str]:
    return list(all_exercises())


def exercise(exercise_id: str) -> Exercise:
    """The exercise with this id; UnknownExerciseError naming the closest ids otherwise."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"an exercise id is a string like 'reduce/sum_int64', not {type(exercise_id).__name__}")
    exercises = all_exercises()
    key = exercise_id.strip().removesuffix(".ipynb").removeprefix("exercises/")
    if key in exercises:
        return exercises[key]
    close = difflib.get_close_matches(key, list(exercises), n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(exercises)}"
    raise UnknownExerciseError(f"no exercise {exercise_id!r}{hint}")
