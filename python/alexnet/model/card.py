"""The model card: what a trained model needs beside its weights to be used without the data it came from.

A card travels with the model: as ``alexnet-model.json`` beside ``alexnet.keras`` in ``model_dir``
(:mod:`.saving`), and as the metadata of a model pin (:mod:`.pin`). It names every output of the model
(``class_ids`` and ``class_names``, by label), the image size the model was trained and validated at, how long
it trained and its final metrics (with ``keep_best``, ``best_epoch``: the 1-based epoch the model and its metrics are
from), where its data came from (the board and the version of its ``categories``
pin) and, when the model was evaluated as it was saved (``alexnet_spark_train(evaluate = TRUE)``), that
``evaluation`` (counts, top-1 and top-5 accuracy, crops, image size, board), and the model its training started from
(``initial_model``: a pin's ``name@version`` or a location), when it did not start afresh. This module does not import
TensorFlow.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import AlexnetError, without_passwords
from ..train.schedule import schedule_apart

#: The card's file beside the model in ``model_dir``.
CARD_FILE = "alexnet-model.json"
#: Version of the card's format, recorded in it.
CARD_FORMAT = 1
#: What every card holds (its other fields may be missing from an older one).
CARD_KEYS = ("image_size", "num_classes", "class_ids", "class_names")


@dataclass(frozen=True)
class ModelCard:
    """What a trained model is: its outputs by name, its input size, its training and its data."""

    image_size: int
    num_classes: int
    class_ids: list[str]
    class_names: list[str]
    epochs: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    best_epoch: int | None = None
    board: str | None = None
    categories_version: str | None = None
    weights_sha256: str = ""
    created: str = ""
    evaluation: dict[str, Any] | None = None
    initial_model: str | None = None
    #: the settings that shape the weights (``dense_units``, ``grouped``), so that a run started from the model is
    #: checked against them before any work; None on cards written before they were recorded
    architecture: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # a card is read by whoever reads the model's board: no password of a board's URL goes into it
        for name in ("board", "initial_model"):
            if getattr(self, name):
                object.__setattr__(self, name, without_passwords(str(getattr(self, name))))
        if self.evaluation and isinstance(self.evaluation.get("board"), str):
            object.__setattr__(self, "evaluation", {**self.evaluation,
                                                    "board": without_passwords(self.evaluation["board"])})
        if len(self.class_ids) != self.num_classes or len(self.class_names) != self.num_classes:
            raise AlexnetError(
                f"A model card needs one class id and one name per output: {self.num_classes} outputs, "
                f"{len(self.class_ids)} ids, {len(self.class_names)} names."
            )

    def to_dict(self) -> dict[str, Any]:
        """The card as plain values (what JSON, pins metadata and R take)."""
        return {"format": CARD_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str) -> ModelCard:
        """A card from :meth:`to_dict`'s values; an :class:`AlexnetError` naming ``where`` when they are not one. The
        image size and learning rate an older version listed among the metrics are left out of them, as the history
        reader leaves them (:func:`alexnet.train.schedule.schedule_apart`)."""
        try:
            return cls(
                image_size=int(values["image_size"]), num_classes=int(values["num_classes"]),
                class_ids=[str(v) for v in values["class_ids"]], class_names=[str(v) for v in values["class_names"]],
                epochs=int(values.get("epochs") or 0),
                best_epoch=None if values.get("best_epoch") is None else int(values["best_epoch"]),
                metrics=schedule_apart({str(k): float(v) for k, v in (values.get("metrics") or {}).items()})[0],
                board=values.get("board"), categories_version=values.get("categories_version"),
                weights_sha256=str(values.get("weights_sha256") or ""), created=str(values.get("created") or ""),
                evaluation=dict(values["evaluation"]) if values.get("evaluation") else None,
                initial_model=None if values.get("initial_model") is None else str(values["initial_model"]),
                architecture=dict(values["architecture"]) if values.get("architecture") else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise AlexnetError(
                f"{where} does not describe an alexnet model ({type(error).__name__}: {error}): it was not written "
                "by alexnet_train(); train again, or give the model's alexnet.keras with its alexnet-model.json."
            ) from None

    def to_json(self) -> str:
        """The card as the text of :data:`CARD_FILE`."""
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> ModelCard:
        """A card from the text of :data:`CARD_FILE` found at ``where``."""
        try:
            values = json.loads(text)
        except ValueError as error:
            raise AlexnetError(f"{where} is not JSON ({error}): write the model again with alexnet_train().") from None
        if not isinstance(values, Mapping):
            raise AlexnetError(f"{where} is not a model card: write the model again with alexnet_train().")
        return cls.from_dict(values, where)


def now() -> str:
    """The time a card is written, in UTC, to the second (ISO 8601)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
