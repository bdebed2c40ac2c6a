"""The table of the 1000 ILSVRC2012 classes from Python: the list of dicts it always was, shown in a few lines."""

from __future__ import annotations

import copy
import json
import pickle
from importlib import resources

import alexnet
from alexnet.data.classes import CLASSES_FILE


def _listed() -> list[dict]:
    """The package's classes file read as the list of dicts imagenet_classes() returned: index, id, name."""
    lines = resources.files("alexnet.data").joinpath(CLASSES_FILE).read_text(encoding="utf-8").splitlines()[1:]
    return [{"index": int(index), "id": wnid, "name": name}
            for index, wnid, name in (line.split("\t") for line in lines)]


def test_the_classes_are_the_list_of_dicts_they_were():
    classes, listed = alexnet.imagenet_classes(), _listed()
    assert isinstance(classes, list) and classes == listed and listed == classes and len(classes) == 1000
    assert [dict(row) for row in classes] == listed and classes[:3] == listed[:3] and classes[-1] == listed[-1]
    assert json.loads(json.dumps(classes)) == listed
    assert pickle.loads(pickle.dumps(classes)) == listed and copy.deepcopy(classes) == listed
    assert {row["id"]: row["name"] for row in classes}["n01440764"] == "tench, Tinca tinca"


def test_the_classes_show_as_a_short_table_of_their_first_and_last_rows():
    """Typed at the REPL (repr) or printed (str), the 1000 classes take 8 lines, where they took 1000."""
    classes = alexnet.imagenet_classes()
    lines = repr(classes).splitlines()
    assert str(classes) == repr(classes)
    assert lines[0] == "1000 classes (index, id, name), a list of dicts; .to_pandas() for a DataFrame:"
    assert lines[1:4] == ["    0  n01440764  tench, Tinca tinca", "    1  n01443537  goldfish, Carassius auratus",
                          "    2  n01484850  great white shark, white shark, man-eater, man-eating sha..."]
    assert lines[4:] == ["  ...", "  997  n13054560  bolete", "  998  n13133613  ear, spike, capitulum",
                         "  999  n15075141  toilet tissue, toilet paper, bathroom tissue"]
    few = type(classes)(classes[:2])  # as few as it shows: every row
    assert repr(few).splitlines()[1:] == ["  0  n01440764  tench, Tinca tinca",
                                          "  1  n01443537  goldfish, Carassius auratus"]
    assert repr(type(classes)()) == "0 classes (index, id, name), a list of dicts; .to_pandas() for a DataFrame"


def test_the_classes_as_a_data_frame():
    frame = alexnet.imagenet_classes().to_pandas()
    assert list(frame.columns) == ["index", "id", "name"] and len(frame) == 1000
    assert frame.to_dict(orient="records") == _listed()
