"""alexnet_evaluate(): exact top-1/top-5 counts over a board's (or data's) validation images, 1 or 10 crops."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from helpers_model import (  # noqa: E402
    IMAGE_SIZE,
    break_in_place,
    by_hand,
    card_for,
    save_model_dir,
    synthetic_board,
    tiny_model,
)
from helpers_train import class_image, jpeg_bytes, write_quirks  # noqa: E402

from alexnet.data.fetch import imagenet_categories, imagenet_validation  # noqa: E402
from alexnet.errors import AlexnetError  # noqa: E402
from alexnet.input.decode import decode_ten_crops  # noqa: E402
from alexnet.model.evaluate import alexnet_evaluate  # noqa: E402

CLASSES = 7  # more than 5, so that top-5 is not every class


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A board of 7 categories with 2 validation images each, a saved model with its card, and a cache in which
    one validation image was broken in place (same size, so the cache still counts it)."""
    root = tmp_path_factory.mktemp("evaluate")
    board = synthetic_board(root, classes=CLASSES, val_per_class=2)
    model = tiny_model(CLASSES, seed=3)
    model_dir = root / "model"
    save_model_dir(model, model_dir, card_for(imagenet_categories(board), board=board))
    cache = root / "cache"
    fetched = imagenet_validation(board, cache_dir=cache)
    broken = fetched["val_image"][3]
    break_in_place(broken)
    return {"board": board, "model": model, "model_dir": str(model_dir), "cache": str(cache), "fetched": fetched,
            "broken": broken}


def _kept(setup):
    fetched = setup["fetched"]
    pairs = [(f, y) for f, y in zip(fetched["val_image"], fetched["val_label"], strict=True) if f != setup["broken"]]
    return [f for f, _ in pairs], [y for _, y in pairs]


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_one_crop_counts_are_the_models_own_predictions_and_a_bad_image_is_listed_not_counted(setup):
    result = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], batch_size=4)
    files, labels = _kept(setup)
    top1, top5 = by_hand(setup["model"], files, labels, IMAGE_SIZE)
    assert result["bad_images"] == [setup["broken"]]
    assert result["images"] == len(files) == 2 * CLASSES - 1
    assert (result["top1_correct"], result["top5_correct"]) == (top1, top5)
    assert result["top1_accuracy"] == pytest.approx(top1 / len(files))
    assert result["top5_accuracy"] == pytest.approx(top5 / len(files))
    assert result["top_k"] == 5 and result["crops"] == 1 and result["protocol"] == "centre crop"
    assert result["image_size"] == IMAGE_SIZE and result["num_classes"] == CLASSES
    assert result["model"].endswith("alexnet.keras")
    # the same images given as data (as imagenet_partition() returns them) count the same
    data = {"val_image": setup["fetched"]["val_image"], "val_label": setup["fetched"]["val_label"],
            "num_classes": CLASSES}
    again = alexnet_evaluate(setup["model_dir"], data, batch_size=5)
    assert (again["images"], again["top1_correct"], again["top5_correct"]) == (len(files), top1, top5)


def test_partitions_of_the_validation_images_add_up_to_the_whole(setup):
    whole = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"])
    parts = [alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], partition=k,
                              total=3) for k in range(3)]
    for key in ("images", "top1_correct", "top5_correct"):
        assert sum(p[key] for p in parts) == whole[key], key
    assert all(p["images"] > 0 for p in parts)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_the_counts_by_class_are_each_images_own_prediction_and_shares_of_classes_add_up(setup):
    whole = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], batch_size=4)
    files, labels = _kept(setup)
    from alexnet.input.decode import decode_for_eval

    pixels = np.stack([decode_for_eval(tf.io.read_file(f), IMAGE_SIZE).numpy() for f in files])
    predicted = np.argsort(-setup["model"].predict(pixels, verbose=0), axis=1, kind="stable")[:, 0]
    ids = [row["id"] for row in imagenet_categories(setup["board"])]
    expected = {}
    for label, guess in zip(labels, predicted.tolist(), strict=True):
        expected.setdefault(label, []).append(guess)
    per_class = whole["per_class"]
    assert [c["index"] for c in per_class] == sorted(expected)
    for row in per_class:
        guesses = expected[row["index"]]
        assert row["id"] == ids[row["index"]] and row["images"] == len(guesses)
        assert row["top1_correct"] == guesses.count(row["index"]), row
        wrong = [g for g in guesses if g != row["index"]]
        assert row["confused_images"] == (max(wrong.count(g) for g in wrong) if wrong else 0)
        assert row["confused_with"] == (ids[min(set(wrong), key=lambda g: (-wrong.count(g), g))] if wrong else "")
    pairs = [(label, guess) for label, guess in zip(labels, predicted.tolist(), strict=True) if label != guess]
    assert sorted((c["index"], c["predicted_index"], c["images"]) for c in whole["confusions"]) == \
        sorted((t, p, pairs.count((t, p))) for t, p in set(pairs))
    assert sum(c["top5_correct"] for c in per_class) == whole["top5_correct"] and whole["confusions"]
    # shares of the board (whole categories each) hold the whole's rows between them
    parts = [alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], partition=k,
                              total=3) for k in range(3)]
    assert sorted((row for p in parts for row in p["per_class"]), key=lambda r: r["index"]) == per_class


def test_a_cluster_adds_its_shares_into_the_dict_of_one_machine_with_its_workers_besides(setup):
    from alexnet.launch.evaluation import combine_shares, evaluate_row

    whole = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"])
    rows = [evaluate_row({"worker": k, "workers": 2, **alexnet_evaluate(
        setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], partition=k, total=2)}) for k in range(2)]
    combined = combine_shares(rows, whole["seconds"])
    # the same keys in the same order (both are evaluation_result's), the cluster's two more after them
    assert list(combined) == [*whole, "workers", "per_worker"]
    same = ("images", "top1_correct", "top5_correct", "top1_accuracy", "top5_accuracy", "top_k", "crops", "protocol",
            "image_size", "num_classes", "bad_images", "model", "per_class", "confusions")
    assert {k: combined[k] for k in same} == {k: whole[k] for k in same}


def test_the_validation_images_the_upload_left_out_are_in_the_result_of_one_machine_and_of_a_cluster(tmp_path):
    """An evaluation of a board said nothing of the validation images its upload had left out, which none of its
    counts can hold: a reader taking it for the whole validation set could not tell (imagenet_validation() said it)."""
    from pathlib import Path

    from alexnet.cli.model import evaluation_summary
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload
    from alexnet.launch.evaluation import combine_shares, evaluate_row

    src = imagenet_synthetic(tmp_path / "src", classes=3, images_per_class=2, val_per_class=2, seed=5,
                             max_side=IMAGE_SIZE)["path"]
    for path in sorted((Path(src) / "ILSVRC" / "Data" / "CLS-LOC" / "val").iterdir())[:2]:
        path.write_bytes(path.read_bytes()[:60])  # truncated where they lie: left out at upload
    board = str(tmp_path / "board")
    imagenet_upload(src, board)
    model_dir = tmp_path / "model"
    save_model_dir(tiny_model(3, seed=1), model_dir, card_for(imagenet_categories(board), board=board))
    cache = str(tmp_path / "cache")
    whole = alexnet_evaluate(str(model_dir), board=board, cache_dir=cache)
    assert whole["left_out_at_upload"] == 2 and whole["images"] == 3 * 2 - 2 and whole["bad_images"] == []
    assert "; 2 validation images left out at upload" in evaluation_summary(whole).splitlines()[1]
    shares = [{"worker": k, "workers": 2, **alexnet_evaluate(str(model_dir), board=board, cache_dir=cache,
                                                              partition=k, total=2)} for k in range(2)]
    assert sum(share["left_out_at_upload"] for share in shares) == 2, "each image once"
    rows = [evaluate_row(share) for share in shares]
    assert combine_shares(rows, 1.0)["left_out_at_upload"] == 2
    # data as imagenet_validation() returns it says its own count; data without it, and a share that does not know
    # (data without it), leave it unknown
    fetched = imagenet_validation(board, cache_dir=cache)
    assert alexnet_evaluate(str(model_dir), fetched)["left_out_at_upload"] == 2
    plain = {"val_image": fetched["val_image"], "val_label": fetched["val_label"], "num_classes": 3}
    unknown = {"worker": 1, "workers": 2, **alexnet_evaluate(str(model_dir), plain)}
    assert unknown["left_out_at_upload"] is None and evaluate_row(unknown)["left_out_at_upload"] == -1
    assert combine_shares([rows[0], evaluate_row(unknown)], 1.0)["left_out_at_upload"] is None
    assert "left out at upload" not in evaluation_summary(unknown)
    # a training that ends with its evaluation scores each worker's partition, as imagenet_partition() fetched it:
    # its count was dropped on the way, and the evaluation said nothing of the images left out
    from alexnet.data.fetch import imagenet_partition
    from alexnet.launch.evaluation import score_share, validation_of
    from alexnet.launch.task import Evaluation, Task

    task = Task(kind="train", board=board, workers=3, evaluation=Evaluation())
    parts = [imagenet_partition(k, 3, board, cache_dir=cache) for k in range(3)]
    trained = [evaluate_row(score_share(str(model_dir), k, 3, task, data=validation_of(part)))
               for k, part in enumerate(parts)]
    assert combine_shares(trained, 1.0)["left_out_at_upload"] == 2
    none_to_score = {**validation_of(parts[0]), "val_image": [], "val_label": [], "left_out_at_upload": 2}
    empty = score_share(str(model_dir), 0, 3, task, data=none_to_score)
    assert empty["images"] == 0 and empty["left_out_at_upload"] == 2, "a worker with nothing to score still counts"


def test_labels_outside_the_models_classes_are_refused_before_scoring(setup):
    data = {"val_image": setup["fetched"]["val_image"][:2], "val_label": [0, CLASSES]}
    with pytest.raises(AlexnetError, match=rf"validation labels \[{CLASSES}\] are outside 0..{CLASSES - 1}"):
        alexnet_evaluate(setup["model_dir"], data)


def test_images_none_of_which_can_be_used_are_refused_not_scored_as_nan(setup, tmp_path):
    """Mistyped paths scored nothing and returned an accuracy of NaN, with a warning only."""
    empty = tmp_path / "empty.JPEG"
    empty.write_bytes(b"")
    data = {"val_image": [str(tmp_path / "nope" / "a.JPEG"), str(empty)], "val_label": [0, 1],
            "num_classes": CLASSES}
    with pytest.raises(AlexnetError, match=r"^None of the 2 validation images can be used .* nothing is left to "
                                           r"score:\n  .*nope/a\.JPEG.*\n  .*empty\.JPEG.*\nCheck the paths given "
                                           r"\(`val_image`\), or replace the images\.$"):
        alexnet_evaluate(setup["model_dir"], data=data)


def test_board_images_none_of_which_can_be_used_say_how_to_fetch_them_again(tmp_path):
    board = synthetic_board(tmp_path, classes=2, val_per_class=1)
    model = save_model_dir(tiny_model(2), tmp_path / "two")
    fetched = imagenet_validation(board, cache_dir=tmp_path / "cache")
    for path in fetched["val_image"]:
        break_in_place(path)
    with pytest.raises(AlexnetError, match=r"(?s)None of the 2 validation images can be used .*\nThey were fetched "
                                           r"from board .* into .*cache: fetch them again with "
                                           r"imagenet_validation\(verify = TRUE\), or delete that folder\.$"):
        alexnet_evaluate(str(model), board=board, cache_dir=tmp_path / "cache")


def test_ten_crops_are_ten_distinct_views_with_their_mirrors(tmp_path):
    image = class_image(np.random.default_rng(0), 2, 90, 130)
    views = decode_ten_crops(tf.constant(jpeg_bytes(image)), IMAGE_SIZE).numpy()
    assert views.shape == (10, IMAGE_SIZE, IMAGE_SIZE, 3) and views.dtype == np.uint8
    flat = views.reshape(10, -1).astype(int)
    assert len({row.tobytes() for row in flat}) == 10, "the ten views are not all different"
    for k in range(5):
        np.testing.assert_array_equal(views[5 + k], views[k][:, ::-1])
    # every format the centre crop takes: CMYK, grayscale, PNG named .JPEG
    for kind in ("cmyk", "grayscale", "png"):
        path = write_quirks(tmp_path / kind)[kind]
        shaped = decode_ten_crops(tf.io.read_file(str(path)), IMAGE_SIZE).numpy()
        assert shaped.shape == (10, IMAGE_SIZE, IMAGE_SIZE, 3), kind


def test_ten_crop_counts_average_the_softmax_over_the_ten_views(setup):
    result = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"], crops=10,
                              batch_size=3)
    files, labels = _kept(setup)
    top1, top5 = by_hand(setup["model"], files, labels, IMAGE_SIZE, crops=10)
    assert (result["images"], result["top1_correct"], result["top5_correct"]) == (len(files), top1, top5)
    assert result["crops"] == 10 and result["protocol"].startswith("10 crops")
    one = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"])
    assert by_hand(setup["model"], files, labels, IMAGE_SIZE) == (one["top1_correct"], one["top5_correct"])


def test_a_model_with_other_classes_than_the_board_is_refused(setup, tmp_path):
    other = save_model_dir(tiny_model(3), tmp_path / "three")
    with pytest.raises(AlexnetError, match=r"3 outputs but board .* has 7 classes"):
        alexnet_evaluate(str(other), board=setup["board"], cache_dir=setup["cache"])


def test_a_board_without_validation_images_is_refused(setup, tmp_path):
    board = synthetic_board(tmp_path, classes=2, val_per_class=0)
    model = save_model_dir(tiny_model(2), tmp_path / "two")
    with pytest.raises(AlexnetError, match="has no validation images") as refused:
        alexnet_evaluate(str(model), board=board, cache_dir=tmp_path / "cache")
    # what to upload for them, in each layout that has them
    for held_in in ("ILSVRC2012_img_val.tar", "LOC_val_solution.csv", "validation-*.parquet",
                    "a folder of category folders holds out a share of each category's images with `val_share`"):
        assert held_in in str(refused.value)
    assert str(refused.value).endswith("`val_share`), or, from R and Python, give the images as `data`.")
    # fetched alone, where no `data` is taken, said without it
    with pytest.raises(AlexnetError, match="has no validation images") as alone:
        imagenet_validation(board, cache_dir=tmp_path / "cache")
    assert str(alone.value).endswith("`val_share`).")
    # data without validation images: said whether they are missing or empty
    for data, said in (({"image": ["a.JPEG"]}, "missing"), ({"val_image": []}, "empty")):
        with pytest.raises(AlexnetError, match=rf"^`data` has no validation images \(`val_image` is {said}\)"):
            alexnet_evaluate(str(model), data)


def test_a_missing_model_is_named(setup, tmp_path):
    missing = tmp_path / "nowhere" / "alexnet.keras"
    with pytest.raises(AlexnetError, match=r"the model .*nowhere.* does not exist"):
        alexnet_evaluate(str(missing), board=setup["board"])


@pytest.mark.parametrize("crops", [0, 5, "ten", 1.5])
def test_crops_other_than_1_or_10_are_refused(setup, crops):
    with pytest.raises(AlexnetError, match=r"`crops` must be 1 .* or 10"):
        alexnet_evaluate(setup["model_dir"], board=setup["board"], crops=crops)


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_board_of_classes_the_model_lacks_is_refused_naming_some_of_them(setup, tmp_path):
    rows = imagenet_categories(setup["board"])
    renamed = [{**row, "id": f"z{i}"} if i >= 2 else row for i, row in enumerate(rows)]
    other = save_model_dir(setup["model"], tmp_path / "other", card_for(renamed))
    missing = ", ".join(row["id"] for row in rows[2:5])
    expected = rf"board .* holds {CLASSES - 2} of its {CLASSES} classes that the model was not trained on " \
               rf"\({missing}, \.\.\. \({CLASSES - 5} more\)\): .* give the images of the classes both hold as " \
               r"`data` with `val_image` and `val_category`"
    with pytest.raises(AlexnetError, match=expected):
        alexnet_evaluate(str(other), board=setup["board"], cache_dir=setup["cache"])
    # the same classes in another order: each image is scored against its own class, by WordNet id
    shuffled = save_model_dir(setup["model"], tmp_path / "shuffled", card_for([rows[1], rows[0], *rows[2:]]))
    data = {**setup["fetched"]}
    files, labels = _kept(setup)
    swapped = [{0: 1, 1: 0}.get(y, y) for y in labels]
    result = alexnet_evaluate(str(shuffled), data)
    assert (result["top1_correct"], result["top5_correct"]) == by_hand(setup["model"], files, swapped, IMAGE_SIZE)
    # images labelled by category are counted against the model's own ids: the data's order does not matter
    by_category = {"val_image": data["val_image"], "val_category": data["val_category"],
                   "class_ids": sorted(data["class_ids"], reverse=True)}
    assert alexnet_evaluate(setup["model_dir"], by_category)["images"] == 2 * CLASSES - 1
    # a model trained on data that did not name its classes names them by their label numbers: not checked either
    numbered = save_model_dir(setup["model"], tmp_path / "numbered",
                              card_for([{"id": str(i), "name": str(i)} for i in range(CLASSES)]))
    assert alexnet_evaluate(str(numbered), data)["images"] == 2 * CLASSES - 1
    # a model without a card names its classes by number: only their number is checked
    cardless = save_model_dir(setup["model"], tmp_path / "cardless")
    assert alexnet_evaluate(str(cardless), data)["images"] == 2 * CLASSES - 1


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_board_of_some_of_the_models_classes_is_scored_by_wordnet_id_over_all_its_outputs(setup, tmp_path,
                                                                                            caplog):
    board = synthetic_board(tmp_path, classes=4, val_per_class=2, seed=5)
    ids = [row["id"] for row in imagenet_categories(board)]
    model_ids = [row["id"] for row in imagenet_categories(setup["board"])]
    assert set(ids) < set(model_ids)  # the first 4 of the model's 7 classes ...
    reordered = save_model_dir(setup["model"], tmp_path / "reordered",  # ... which are its last 4 here
                               card_for([*imagenet_categories(setup["board"])[4:], *imagenet_categories(board)[::-1]]))
    card_ids = [*model_ids[4:], *ids[::-1]]
    fetched = imagenet_validation(board, cache_dir=tmp_path / "cache")
    labels = [card_ids.index(c) for c in fetched["val_category"]]
    with caplog.at_level("INFO", logger="alexnet.model.evaluate"):
        result = alexnet_evaluate(str(reordered), board=board, cache_dir=tmp_path / "cache")
    assert f"board {board} holds 4 of the model's {CLASSES} classes: its images are scored by WordNet id" in caplog.text
    assert (result["images"], result["num_classes"], result["top_k"]) == (8, CLASSES, 5)
    assert (result["top1_correct"], result["top5_correct"]) == \
        by_hand(setup["model"], fetched["val_image"], labels, IMAGE_SIZE)
    assert sorted(row["id"] for row in result["per_class"]) == sorted(ids)
    assert all(row["index"] == card_ids.index(row["id"]) and row["images"] == 2 for row in result["per_class"])
    # the same from data labelled by the board's own indices, and by category
    again = alexnet_evaluate(str(reordered), fetched)
    by_category = alexnet_evaluate(str(reordered), {"val_image": fetched["val_image"],
                                                    "val_category": fetched["val_category"]})
    for other in (again, by_category):
        assert (other["top1_correct"], other["top5_correct"], other["per_class"]) == \
            (result["top1_correct"], result["top5_correct"], result["per_class"])
    # a model of the board's 4 classes on the model's board of 7: refused, naming what it lacks
    four = save_model_dir(tiny_model(4), tmp_path / "four", card_for(imagenet_categories(board)))
    with pytest.raises(AlexnetError, match=rf"holds 3 of its 7 classes that the model was not trained on "
                                           rf"\({', '.join(model_ids[4:])}\)"):
        alexnet_evaluate(str(four), board=setup["board"], cache_dir=setup["cache"])


def test_without_data_the_default_board_is_scored_and_without_one_the_error_says_what_to_give(setup, tmp_path,
                                                                                              monkeypatch, caplog):
    monkeypatch.setenv("ALEXNET_BOARD", setup["board"])
    whole = alexnet_evaluate(setup["model_dir"], cache_dir=setup["cache"])
    assert whole["images"] == 2 * CLASSES - 1
    monkeypatch.setenv("ALEXNET_BOARD", str(tmp_path / "no-board"))
    with pytest.raises(AlexnetError, match=r"no-board does not exist.*; or give the images to evaluate on as `data`"):
        alexnet_evaluate(setup["model_dir"])
    # with data, what says which of a board's images to score is not used (not even checked), and a warning says so
    with caplog.at_level("WARNING", logger="alexnet.model.evaluate"):
        again = alexnet_evaluate(setup["model_dir"], setup["fetched"], board=setup["board"], total=2, partition=3)
    assert again["images"] == whole["images"]
    assert "`board`, `partition`, `total`: they say which of a board's validation images are scored; with `data`, " \
           "its own images are scored and they are not used." in caplog.text
    with pytest.raises(AlexnetError, match=r"`data` must be a partition as imagenet_partition\(\) .* not a str"):
        alexnet_evaluate(setup["model_dir"], setup["board"])


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_the_command_line_evaluates_a_model_or_a_model_pin(setup, capsys):
    import json

    from alexnet import cli
    from alexnet.model.publishing import publish_model

    expected = alexnet_evaluate(setup["model_dir"], board=setup["board"], cache_dir=setup["cache"])
    common = ["--board", setup["board"], "--cache-dir", setup["cache"], "--json"]
    assert cli.main(["evaluate", setup["model_dir"], *common]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {k: printed[k] for k in ("images", "top1_correct", "top5_correct")} == \
        {k: expected[k] for k in ("images", "top1_correct", "top5_correct")}
    assert printed["per_class"] == expected["per_class"] and printed["confusions"] == expected["confusions"]
    # the summary names the lowest classes, lowest first, and the most frequent confusions
    assert cli.main(["evaluate", setup["model_dir"], *common[:4]]) == 0
    lines = capsys.readouterr().out.splitlines()
    missed = [c for c in expected["per_class"] if c["top1_accuracy"] < 1]  # a class all right is not low
    lowest = sorted(missed, key=lambda c: (c["top1_accuracy"], c["index"]))[:3]
    assert lowest and lines[2].startswith("Lowest top-1: ") and lines[2].count("%") == len(lowest), lines
    positions = [lines[2].index(f"{c['name'].split(',')[0]} {c['top1_accuracy']:.1%} ({c['top1_correct']} of ")
                 for c in lowest]
    assert positions == sorted(positions), lines[2]
    first = expected["confusions"][0]
    images = f"{first['images']} image{'s' if first['images'] != 1 else ''}"
    assert lines[3].startswith(f"Most confused: {first['name'].split(',')[0]} taken for "
                               f"{first['predicted_name'].split(',')[0]} ({images})"), lines
    from pathlib import Path

    from alexnet.model.card import ModelCard

    card = ModelCard.from_json(Path(setup["model_dir"], "alexnet-model.json").read_text(), "the test's card")
    publish_model(setup["board"], "cli-model", f"{setup['model_dir']}/alexnet.keras", card)
    assert cli.main(["evaluate", "--model-pin", "cli-model", "--partition", "1", "--total", "2", "--crops", "10",
                     *common[:4]]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Top-1 accuracy ") and "10 crops" in out and "top-5" in out


def test_an_image_the_quick_check_misses_stops_the_evaluation_with_its_name(setup, tmp_path, monkeypatch):
    """No batch is dropped silently: a file that still fails to decode is named (the check is bypassed here to
    stand for a corruption it cannot see)."""
    import alexnet.input.scan

    files, labels = _kept(setup)
    empty = tmp_path / "empty.JPEG"
    empty.write_bytes(b"")
    monkeypatch.setattr(alexnet.input.scan, "scan_images", lambda files, parallel=None: [])
    data = {"val_image": [*files[:5], str(empty), *files[5:]], "val_label": [*labels[:5], 0, *labels[5:]]}
    with pytest.raises(AlexnetError, match=r"1 validation image\(s\) .* cannot be decoded .*empty\.JPEG"):
        alexnet_evaluate(setup["model_dir"], data, batch_size=4)


def test_a_batch_that_does_not_fit_says_so_and_blames_no_image(setup, monkeypatch):
    """A batch too large for memory was said as every image of it "passed the usable-image check but cannot be
    decoded (ResourceExhaustedError)", each named; a batch size of 1e10 hung."""
    from alexnet.input import pipeline
    from alexnet.model import evaluate as evaluate_module
    from alexnet.tfimport import tf

    files, labels = _kept(setup)
    data = {"val_image": files, "val_label": labels}
    whole = alexnet_evaluate(setup["model_dir"], data)
    assert alexnet_evaluate(setup["model_dir"], data, batch_size=10**10)["top1_correct"] == whole["top1_correct"]

    def exhausted(*args, **kwargs):
        def batches():
            raise tf.errors.ResourceExhaustedError(
                None, None, "OOM when allocating tensor with shape[4096,10,224,224,3]\n\t [[{{node IteratorGetNext}}]]")
            yield
        return batches()

    monkeypatch.setattr(pipeline, "exact_eval_dataset", exhausted)
    with pytest.raises(AlexnetError, match=r"^A batch of 4 validation images \(1 crop of \d+ pixels each\) could not "
                                           r"be made \(ResourceExhaustedError: OOM when allocating tensor with "
                                           r"shape\[4096,10,224,224,3\]\), though each image decodes alone: give a "
                                           r"smaller `batch_size`\.$"):
        alexnet_evaluate(setup["model_dir"], data, batch_size=4)
    assert evaluate_module._first_line(ValueError("")) == "no message"


@pytest.mark.long  # over 10 s: make test-long (CI)
def test_a_size_free_model_is_scored_at_another_size_and_a_fixed_one_only_at_its_own(setup, tmp_path, capsys):
    from alexnet import cli

    free = tiny_model(CLASSES, seed=5, image_size=None)
    free_dir = tmp_path / "free"
    save_model_dir(free, free_dir, card_for(imagenet_categories(setup["board"]), board=setup["board"]))
    files, labels = _kept(setup)
    common = {"board": setup["board"], "cache_dir": setup["cache"], "batch_size": 4}
    at_96 = alexnet_evaluate(str(free_dir), image_size=96, **common)
    assert at_96["image_size"] == 96
    assert (at_96["top1_correct"], at_96["top5_correct"]) == by_hand(free, files, labels, 96)
    at_card = alexnet_evaluate(str(free_dir), **common)
    assert at_card["image_size"] == IMAGE_SIZE
    assert (at_card["top1_correct"], at_card["top5_correct"]) == by_hand(free, files, labels, IMAGE_SIZE)
    # the command line passes the size on
    assert cli.main(["evaluate", str(free_dir), "--board", setup["board"], "--cache-dir", setup["cache"],
                     "--image-size", "96"]) == 0
    assert "; 96 pixels; " in capsys.readouterr().out
    with pytest.raises(AlexnetError, match="takes only images of 64 pixels"):
        alexnet_evaluate(setup["model_dir"], image_size=96, **common)
    with pytest.raises(AlexnetError, match="image_size"):
        alexnet_evaluate(str(free_dir), image_size=16, **common)


def test_validation_images_stored_smaller_than_evaluation_reads_them_are_warned_of(setup, tmp_path, caplog):
    """Evaluation resizes the short side to image_size * 256 / 224 before its crops: a board uploaded with `resize`
    below that had every crop enlarged without a word; a warning names both and what to change, from a board's
    images and from those given as data alike."""
    from alexnet.data.synthetic import imagenet_synthetic
    from alexnet.data.upload import imagenet_upload

    tree = imagenet_synthetic(tmp_path / "tree", classes=CLASSES, images_per_class=1, val_per_class=1, max_side=96)
    board = str(tmp_path / "board")
    imagenet_upload(tree["path"], board=board, resize=80)
    free = tiny_model(CLASSES, seed=5, image_size=None)
    save_model_dir(free, tmp_path / "free", card_for(imagenet_categories(board), board=board))
    cache = str(tmp_path / "cache")

    def warned(**options) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="alexnet"):
            alexnet_evaluate(str(tmp_path / "free"), **options)
        return [r.getMessage() for r in caplog.records if "`resize`" in r.getMessage()]

    said = ("The board's images were stored with `resize` = 80: evaluation resizes the short side of each image to 82 "
            "before it crops `image_size` = 72 out of it, and would enlarge every image it reads from 80 to 82 pixels; "
            "upload them again with `resize` of at least 82 (the paper cropped 224 out of a short side of 256) with "
            "imagenet_upload(), or give an `image_size` of at most 70.")
    assert warned(board=board, cache_dir=cache, image_size=72) == [said]
    assert warned(board=board, cache_dir=cache, image_size=72, crops=10) == [said]
    assert warned(data=imagenet_validation(board, cache_dir=cache), image_size=72) == [said]
    # the card's 64 pixels read from a short side of 73, within the 80 stored; a board of images as they were
    assert warned(board=board, cache_dir=cache) == []
    assert warned(board=setup["board"], cache_dir=setup["cache"], image_size=72) == []


def test_options_and_a_drawing_path_are_checked_before_tensorflow_is_imported(tmp_path):
    """A mistake in an evaluation's options or in the filters' PNG path is said at once (it took 13 s of
    TensorFlow's import first)."""
    code = ("import sys\nimport alexnet\nfrom alexnet.errors import AlexnetError\n"
            "for call in (lambda: alexnet.alexnet_evaluate('m', board='b', crops=5),\n"
            f"             lambda: alexnet.alexnet_filters('m', {str(tmp_path / 'f.jpg')!r})):\n"
            "    try:\n        call()\n    except AlexnetError as error:\n        print(str(error).split(':')[0])\n"
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["`crops` must be 1 (the centre crop) or 10 (the paper's corners, centre and mirrors), "
                                "not 5.", f"`path` = {tmp_path / 'f.jpg'} does not end in .png", "False"]
