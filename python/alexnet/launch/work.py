"""The kinds of barrier job, as a table: what the driver checks, what each worker runs, its row, how rows combine.

Every Spark job of alexnet is one barrier job (:mod:`alexnet.launch.job`): one task per worker, all started
together, each running a function in a fresh Python process (:func:`alexnet.launch.worker.run_worker`). What
differs between a training and an evaluation is only what this table holds for its ``kind``: the checks of its
arguments before the board is read (``check``, giving the :class:`~alexnet.launch.task.Task` fields of the work)
and with the board (``fit``), the function each worker runs (``run``), the worker's flat row and its columns (what
R's ``spark_apply()`` carries back), and the driver's end of the job (``combine``: the evaluation the workers'
rows add up to, if any). The barrier plumbing is the launcher's; what the workers do is this table's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import AlexnetError
from .evaluation import (
    EVALUATE_COLUMNS,
    check_evaluation,
    combine_shares,
    evaluate_row,
    evaluate_work,
    fit_evaluation,
)
from .task import KINDS, Task
from .training import check_training, combine_training, fit_training, train_columns, train_row, train_work


@dataclass(frozen=True)
class Work:
    """One kind of barrier job: ``noun`` names it in messages; ``check(workers, board, local_master=, where=,
    **arguments)`` gives the task's fields of the work; ``fit(task, categories)`` checks the board's categories;
    ``run(index, addresses, task)`` is what each worker runs; ``columns(task)`` and ``row(result)`` make its flat
    row; ``combine(task, rows, seconds, shown)`` the job's evaluation from the rows (``None``: none), the workers'
    warnings the driver has not ``shown`` said; ``relaunch(task)``
    says what a relaunch after a failure does; ``timeout_advice`` what to do when the job ran out of time."""

    noun: str
    check: Callable[..., dict[str, Any]]
    fit: Callable[[Task, list[dict[str, Any]]], None]
    run: Callable[..., dict[str, Any]]
    columns: Callable[[Task], dict[str, type]]
    row: Callable[[Mapping[str, Any]], dict[str, Any]]
    combine: Callable[[Task, Sequence[Mapping[str, Any]], float, Collection[str]], dict[str, Any] | None]
    relaunch: Callable[[Task], str]
    timeout_advice: str


def _training_relaunch(task: Task) -> str:
    if task.settings is not None and task.settings.checkpoint_dir:
        return "resuming from the last checkpoint"
    return "starting afresh (no checkpoint_dir)"


WORK: dict[str, Work] = {
    "train": Work(
        noun="training", check=check_training, fit=fit_training, run=train_work, columns=train_columns, row=train_row,
        combine=combine_training, relaunch=_training_relaunch,
        timeout_advice="raise `timeout`, or train less per run (with `checkpoint_dir` a new run resumes)"),
    "evaluate": Work(
        noun="evaluation", check=check_evaluation, fit=fit_evaluation, run=evaluate_work,
        columns=lambda task: dict(EVALUATE_COLUMNS), row=evaluate_row,
        combine=lambda task, rows, seconds, shown: combine_shares(rows, seconds),
        relaunch=lambda task: "scoring every image again",
        timeout_advice="raise `timeout`, or use more workers"),
}


def work_of(kind: str) -> Work:
    """The entry of :data:`WORK` for ``kind``; an :class:`AlexnetError` naming the kinds otherwise."""
    if kind not in WORK:
        raise AlexnetError(f"the kind of a barrier job must be one of {', '.join(KINDS)}, not {kind!r}.")
    return WORK[kind]


def worker_function(task: Task, **extra: Any) -> Callable[[int, list[str]], Any]:
    """``function(index, addresses)``: what each worker of ``task`` runs (``extra``: more keyword arguments, such
    as a training's ``callbacks``)."""
    return partial(work_of(task.kind).run, task=task, **extra)


def row_of(task: Task, result: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's result as the flat row of its kind."""
    return work_of(task.kind).row(result)


def column_types(task: Task) -> dict[str, str]:
    """The columns of ``task``'s flat rows and their Python types (``int``, ``float``, ``str``, ``bool``), in order,
    as a launcher that needs them declared (``spark_apply(columns = )``) takes them."""
    return {name: kind.__name__ for name, kind in work_of(task.kind).columns(task).items()}
