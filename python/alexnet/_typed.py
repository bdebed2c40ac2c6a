# Generated from the declarations of the settings and the public functions' signatures: do not edit.
# `make setup` writes it again, with `python -m alexnet.cli.to_typed python/alexnet/_typed.py`, when one changes.
# mypy: disable-error-code="empty-body"
"""The public functions that take declared settings, with the signatures type checkers and editors read.

At run time these functions take their settings through ``**`` keywords, and their signature is built from the
declarations when their module is imported; ``alexnet/__init__.py`` imports the functions below in their place under
``TYPE_CHECKING`` alone, so that every setting is completed and checked (its name, and a value of the kind it takes)
without any change to what runs (see :mod:`alexnet.cli.to_typed`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

    from .launch.api import SparkRun
    from .train.settings import TrainSettings


def alexnet_benchmark(
    data: Mapping[str, Any] | str | os.PathLike | None = None,
    *,
    stages: str | Sequence[Literal["decode", "naive", "naive_auto", "io", "synthetic", "train", "fetch",
        "time_to_accuracy", "scaling"]] = ("decode", "naive", "naive_auto", "io", "synthetic", "train"),
    images: int = 2000,
    batch_size: int = 32,
    image_size: int = 224,
    cores: int | None = None,
    seconds: float = 5.0,
    parallel: int | None = None,
    cache: bool = True,
    resize: int | None = None,
    quality: int = 90,
    model_steps: int = 5,
    dense_units: int = 4096,
    isolation: Literal["process", "threads"] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    board: str | os.PathLike[str] | None = None,
    fetch_partition: int = 0,
    fetch_total: int = 16,
    fetch_workers: int = 8,
    target_accuracy: float = 0.75,
    max_epochs: int = 8,
    repeats: int = 3,
    accuracy_classes: int = 10,
    accuracy_images_per_class: int = 150,
    accuracy_val_per_class: int = 50,
    accuracy_image_size: int = 176,
    accuracy_batch_size: int = 128,
    accuracy_dense_units: int = 512,
    accuracy_workers: int = 1,
    accuracy_levers: str | Sequence[str] | None = None,
    accuracy_link: str | os.PathLike[str] = "loopback",
    scaling_workers: int = 2,
    links: str | Sequence[str] = ("loopback", "1gbit", "10gbit"),
    levers: str | Sequence[str] = ("today", "bfloat16", "packed", "accumulate", "local_sgd", "combined"),
    scaling_steps: int = 5,
    scaling_warmup_steps: int = 2,
    step_seconds: float | Sequence[float] = (0.15,),
    scaling_classes: int = 8,
    scaling_images_per_class: int = 40,
    scaling_timeout: float = 3600.0,
    scaling_resume: bool = False,
) -> dict[str, Any]:
    """Benchmark the input pipeline against a plain decode, the original pipeline and the model; name the bottleneck.

    ``data`` is a partition (``imagenet_partition()``'s result), an ImageNet folder, or ``None`` for a
    synthetic ImageNet of ``images`` images written to a temporary folder; at most ``images`` of its
    images are used. ``stages`` picks among ``decode``, ``naive``, ``naive_auto``, ``io``, ``synthetic``,
    ``train`` (the default: all six), ``fetch`` (serial against parallel download of partition
    ``fetch_partition`` of ``fetch_total`` from ``board``, with ``fetch_workers`` downloads at once) and
    ``time_to_accuracy`` (below). See the module documentation for what each stage measures.

    ``decode``, ``naive``, ``naive_auto`` and ``io`` are measured on 1 core, 2 cores and ``cores`` (default:
    every CPU this process may use); ``isolation`` is ``"process"`` (a child pinned to those CPUs; the default
    on Linux) or ``"threads"`` (this process, tf.data's thread pool limited instead). ``io`` uses ``parallel``
    decodes (``None``: one per usable CPU, as in training) and, with ``cache``, keeps the compressed bytes in
    memory as the ``decode`` reference does.

    ``resize`` measures pre-resized storage: ``io`` and ``train`` then read copies of the images
    re-encoded as ``imagenet_upload(resize = resize, quality = quality)`` stores them, while ``decode`` and
    the naive pipelines still read the original full-size files (pass a partition of a board uploaded with
    ``resize`` instead to run every stage on the stored bytes).

    Each measurement runs for at least ``images`` images and ``seconds`` seconds after a warm-up (a
    measurement of a second or more that got less than 90% of its CPUs is listed in ``summary$contended``);
    ``synthetic`` and ``train`` run ``model_steps`` steps (``train``: two epochs of them, timed over the second) of
    AlexNet with ``dense_units`` units in its dense layers, on batches of ``batch_size`` images of
    ``image_size`` pixels, computing in ``precision`` (``None``: the hardware's; ``"float32"``, ``"bfloat16"``,
    ``"float16"``: see :mod:`alexnet.train.precision`).

    ``time_to_accuracy`` trains two recipes, each for ``max_epochs`` epochs in full, on the same images from each
    of ``repeats`` seeds (``seed`` and those after it), the recipes alternating: the paper's (float32, every epoch
    at ``accuracy_image_size``, the rate 0.01 divided by 10 on a plateau, hard labels) and the package's defaults
    (``precision``, sizes of about half, three quarters and all of ``accuracy_image_size`` over equal shares of
    the epochs, the rate scaled linearly with the batch and brought down to zero, labels smoothed by 0.1). For
    each recipe it reports the median and range over the seeds of the wall time to ``target_accuracy`` top-1
    validation accuracy, the final and the best accuracy and the largest epoch-to-epoch fall in the second half,
    and each final model scored at its training size and 32 pixels above; the verdict is on the medians (see
    :mod:`alexnet.bench.accuracy`). Its images are ``data``'s
    (with validation images), or a synthetic ImageNet of ``accuracy_classes`` categories of
    ``accuracy_images_per_class`` training and ``accuracy_val_per_class`` validation images; its batches
    are of ``accuracy_batch_size`` images, its dense layers of ``accuracy_dense_units`` units (``batch_size``,
    ``image_size`` and ``dense_units`` keep their meaning for the other stages).

    The defaults of ``time_to_accuracy`` are calibrated for a small CPU (2 cores without bfloat16): one seed of both
    recipes takes about ten minutes there, and the paper's recipe reaches the target near the middle of its epochs.
    ``accuracy_batch_size`` is 128, the batch the paper's rate is for: with ``lr_scaling = "linear"`` the defaults
    then start from the same 0.01 peak, so that the comparison is about precision, image sizes and how the rate ends
    (a smaller batch would also lower the defaults' rate, by ``batch / 128``, and with it their accuracy per epoch:
    what the linear rule is for is larger batches, on clusters). Ten categories put chance at 0.1 and the target of
    0.75 well above it; 1,500 training images make 11 steps an epoch, and the paper's recipe passed the target after
    3 to 5 of its 8 epochs in the calibration runs; 500 validation images measure accuracy to about 2 points. The
    final size of 176 pixels (and dense layers of 512 units) keeps a paper epoch near 35 seconds there, while the
    defaults' smallest size (88) is still above AlexNet's minimum.

    Every setting is checked before any work (:func:`alexnet.bench.plan.check_plan`). Returns a dict: ``machine``,
    ``settings`` (the settings as used, each stage's own under its name), ``data`` (source, images, compressed
    bytes), ``stages`` (one record per measurement: ``stage``, ``cores``, ``images_per_second``, ``images``,
    ``seconds``, ``load_average``, ``peak_rss_mb``, ...), ``summary`` (``ratios`` against the targets,
    ``comparisons`` without a target, ``bottleneck``, ``cores_to_feed_synthetic``, ``model_devices`` and
    ``model_images_per_second`` (the devices the model's rate counts and that rate), ``io_peak_rss_mb``, and with
    ``time_to_accuracy`` its ``time_ratio``, ``accuracy_difference`` and ``final_vs_best`` against their targets,
    each with ``what``, ``value``, ``target``, ``bound`` and ``met``), ``time_to_accuracy`` (``None`` unless asked
    for: ``settings``, ``data``, ``recipes`` (``paper`` and ``defaults``, each with what it trained with,
    ``seconds_to_target``, ``final_accuracy``, ``best_accuracy``, ``late_drop``, ... as median, min and max over
    the seeds, and ``runs``, one record per seed with ``val_accuracy`` and ``seconds`` per epoch: see
    :func:`alexnet.bench.accuracy.summarize`), ``time_ratio``, ``accuracy_difference``, ``final_vs_best``,
    ``targets``, ``seconds``), ``json`` and ``png`` (the files written into ``output_dir``, by default a new
    temporary folder).

    Every setting, with its default (the declaration, :mod:`alexnet.bench.plan`), first those every stage shares:

    - ``stages`` (default ``('decode', 'naive', 'naive_auto', 'io', 'synthetic', 'train')``): the stages to run, in
      this order, among decode, naive, naive_auto, io, synthetic, train, fetch, time_to_accuracy, scaling (fetch
      needs `board`; time_to_accuracy and scaling train for minutes).
    - ``images`` (default ``2000``): images used; each measurement also runs over at least this many.
    - ``batch_size`` (default ``32``): images per batch.
    - ``image_size`` (default ``224``): pixels of the model's square input (at least 63 when synthetic or train
      runs).
    - ``cores`` (default ``None``): most cores the pipelines are measured on (unset: every CPU this process may
      use); they run on 1, 2 and this many.
    - ``seconds`` (default ``5.0``): least seconds each measurement runs, after its warm-up.
    - ``parallel`` (default ``None``): images the pipeline decodes at once (unset: one per CPU, as in training).
    - ``cache`` (default ``True``): keep the compressed bytes in memory after the first pass, as the decode
      reference does.
    - ``resize`` (default ``None``): the io and train stages read the images re-encoded to this short side, at least
      63 and `image_size`, as imagenet_upload(resize = ) stores them (decode and naive still read the originals).
    - ``quality`` (default ``90``): JPEG quality of the images re-encoded for `resize`.
    - ``model_steps`` (default ``5``): training steps synthetic and train time.
    - ``dense_units`` (default ``4096``): units of the model's two hidden dense layers.
    - ``isolation`` (default ``None``): each core count measured in a child process pinned to that many CPUs
      ("process"), or in this process with tf.data's threads limited ("threads"); unset: process where CPUs can be
      pinned (Linux).
    - ``output_dir`` (default ``None``): the folder (or gs:// or s3:// location) of alexnet-benchmark.json and
      alexnet-benchmark.png (unset: a new temporary folder); while the scaling stage runs, also of scaling-
      rows.jsonl, its rows as they are measured, which a run stopped before its end keeps (and `scaling_resume`
      takes again).
    - ``seed`` (default ``0``): random seed of the images' sample, the synthetic data and the models.
    - ``precision`` (default ``None``): what synthetic, train and the defaults recipe of time_to_accuracy compute in
      (unset: the one measured to train faster here, as alexnet_train() picks it).

    The fetch stage's own:
    - ``board`` (default ``None``): the board a partition is downloaded from (the other stages take their images
      from `data`, or draw them: on the command line, `alexnet bench --board` gives them a partition of the board
      too, `--partition` of `--total`).
    - ``fetch_partition`` (default ``0``): the 0-based partition downloaded.
    - ``fetch_total`` (default ``16``): the number of partitions the board's categories are split into.
    - ``fetch_workers`` (default ``8``): parallel downloads, measured against one at a time.

    The time_to_accuracy stage's own:
    - ``target_accuracy`` (default ``0.75``): the top-1 validation accuracy to reach (a share between 0 and 1).
    - ``max_epochs`` (default ``8``): epochs each recipe trains in full (no early stop).
    - ``repeats`` (default ``3``): seeds each recipe trains from (`seed` and those after it); the verdict is on the
      medians.
    - ``accuracy_classes`` (default ``10``): categories of its synthetic ImageNet (used when `data` is unset).
    - ``accuracy_images_per_class`` (default ``150``): training images per category of its synthetic ImageNet.
    - ``accuracy_val_per_class`` (default ``50``): validation images per category of its synthetic ImageNet.
    - ``accuracy_image_size`` (default ``176``): the final image size (the defaults train at about half, three
      quarters and all of it).
    - ``accuracy_batch_size`` (default ``128``): images per batch (128: the batch the paper's rate is for).
    - ``accuracy_dense_units`` (default ``512``): units of the two hidden dense layers.
    - ``accuracy_workers`` (default ``1``): workers each recipe trains on: with more than one, each a process on
      CPUs of its own with its share of the categories, joined by `accuracy_link`.
    - ``accuracy_levers`` (default ``None``): lever sets (as the scaling stage's `levers`) each trained as a recipe
      of its own: the defaults with those settings ("packed", "sync_every=4"); those that train alike, or as the
      defaults (today), are trained once, every name keeping its results.
    - ``accuracy_link`` (default ``'loopback'``): the link joining the workers when there are several: loopback
      (127.0.0.1), or a rate as tc writes it (1gbit, 100mbit; /0.5ms adds a round trip), each worker in a network
      namespace of its own (root only).

    The scaling stage's own:
    - ``scaling_workers`` (default ``2``): workers trained together, each on CPUs of its own (at most the cores this
      process may use).
    - ``links`` (default ``('loopback', '1gbit', '10gbit')``): the links joining the workers: loopback (127.0.0.1),
      or a rate as tc writes it (1gbit, 10gbit, 200mbit; /0.5ms adds a round trip, with the kernel's netem), each
      worker in a network namespace of its own (root only; without root, loopback alone; without netem, no link with
      a round trip).
    - ``levers`` (default ``('today', 'bfloat16', 'packed', 'accumulate', 'local_sgd', 'combined')``): the lever
      sets compared: today, bfloat16, packed, accumulate, local_sgd, combined, adapted, or training settings written
      setting=value+setting=value; those that train alike (bfloat16 and allreduce_precision=bfloat16) are measured
      once, every name keeping its rows.
    - ``scaling_steps`` (default ``5``): steps timed in each run, after its warm-up (the median counts; with local
      SGD, rounded up to whole periods of sync_every steps, whose mean counts).
    - ``scaling_warmup_steps`` (default ``2``): steps of each run left out of the timing.
    - ``step_seconds`` (default ``(0.15,)``): seconds a step of `batch_size` images computes on the hardware the
      projection is for (a GPU's).
    - ``scaling_classes`` (default ``8``): categories of the stage's synthetic images (shared out among the workers;
      the model has 1000 outputs whatever this is).
    - ``scaling_images_per_class`` (default ``40``): training images per category of them.
    - ``scaling_timeout`` (default ``3600.0``): seconds a run of the workers may take before it is stopped.
    - ``scaling_resume`` (default ``False``): keep the rows a stopped run wrote to scaling-rows.jsonl in
      `output_dir` where it measured them with the same settings, and measure only the others (needs `output_dir`).
    """
    ...


def alexnet_evaluate(
    model: Any,
    data: Mapping[str, Any] | None = None,
    board: str | os.PathLike | None = None,
    *,
    crops: Literal[1, 10] = 1,
    batch_size: int = 64,
    parallel: int | None = None,
    image_size: int | None = None,
    partition: int = 0,
    total: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over validation images, counted exactly.

    ``model``: a model pin from :func:`alexnet.alexnet_model`, a ``model_dir`` or ``alexnet.keras`` location, or
    (Python) a ``keras.Model``. Images: ``data``'s ``val_image`` with ``val_label`` (or ``val_category``), or,
    with ``board``, the board's validation images, share ``partition`` of ``total`` (default: all of them;
    see :func:`alexnet.data.fetch.imagenet_validation`, which fetches them into ``cache_dir``,
    ``fetch_workers`` downloads at once). ``crops=1`` scores the centre crop; ``crops=10`` the softmax averaged
    over the four corner and the centre squares of the image resized to ``image_size * 256 / 224`` and their
    mirrors. ``batch_size`` images are decoded ``parallel`` at a time (None: one per usable CPU) and scored together.
    ``crops``, ``batch_size``, ``parallel`` and ``image_size`` are the options of an evaluation, and ``partition``,
    ``total``, ``cache_dir`` and ``fetch_workers`` those of a board's images, each declared once with its default
    (:mod:`alexnet.model.options`) and listed below.
    ``image_size``: the side of the crop scored; ``None`` is the size the model trained at last (its card's). A
    model whose input takes every size (as training builds them) can be scored at another size: a model trained
    at a lower size than it is tested at often scores better a little above it (FixRes), so try ``image_size``
    32 pixels above the card's. A model whose input is fixed takes only its own size.

    Without ``data``, ``board`` ``None`` is the default board (``$ALEXNET_BOARD``, see
    :mod:`alexnet.storage.board`); with ``data``, ``board`` and the options of a board's images are not used (a
    warning says so).

    Before any work: ``data`` that is not a partition, no board where one is needed, ``crops`` not 1 or 10,
    ``partition`` not below ``total``, a missing model, data or a board without validation images, or data or a
    board holding classes the model was not trained on (when both name them by WordNet id; else another number of
    them) raise :class:`AlexnetError`. Data or a board of some of the model's classes (or all of them in another
    order) is scored by WordNet id, over all the model's outputs (a line of the log says how many of its classes it
    holds). Images that fail the usable-image check are left out, listed in ``bad_images`` and logged; an image that
    still cannot be decoded raises, naming it.

    Returns a dict: ``images`` (counted), ``top1_correct``, ``top5_correct``, ``top1_accuracy``,
    ``top5_accuracy``, ``top_k`` (min(5, classes): what "top-5" counts), ``crops``, ``protocol``,
    ``image_size``, ``num_classes``, ``images_per_second``, ``seconds``, ``bad_images``, ``left_out_at_upload`` (how
    many validation images of the board's the upload left out, which no evaluation of it can count: those of the
    categories scored, as :func:`alexnet.data.fetch.imagenet_validation` counts them, or ``data``'s own count when it
    came from there; None when not known), ``model`` (its path,
    or ``name@version`` for a pin), and the same counts class by class (:meth:`ClassCounts.tables`):
    ``per_class``, a record per class with images (``index``, ``id``, ``name``, ``images``, ``top1_correct``,
    ``top5_correct``, ``top1_accuracy``, ``top5_accuracy``, ``confused_with``: the id of the class its images were
    most often taken for, ``confused_images``: how many), and ``confusions``, a record per pair of a class and a
    class its images were wrongly taken for (``index``, ``id``, ``name``, ``predicted_index``, ``predicted_id``,
    ``predicted_name``, ``images``), the most frequent first.

    Its options, with their defaults:

    - ``crops`` (default ``1``): 1: the centre crop; 10: the four corners and the centre of the image resized to
      256/224 of the crop, and their mirrors (the paper's).
    - ``batch_size`` (default ``64``): images scored at once.
    - ``parallel`` (default ``None``): images decoded at once (unset: one per CPU this process may use).
    - ``image_size`` (default ``None``): the side of the crop scored (unset: the size the model trained at last; a
      model trained at a lower size often scores better 32 pixels above it).
    - ``partition`` (default ``0``): the 0-based share of the board's validation images scored.
    - ``total`` (default ``1``): the number of shares the board's validation images are split into (1: all of them).
    - ``cache_dir`` (default ``None``): where the validation images are extracted (unset: a folder under the user's
      cache directory).
    - ``fetch_workers`` (default ``8``): parallel downloads of the validation images.
    """
    ...


def alexnet_export(
    model: Any,
    path: str | os.PathLike | None = None,
    format: Literal["savedmodel", "tflite"] = "savedmodel",
    *,
    top: int = 5,
    overwrite: bool = False,
    board: str | os.PathLike | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Export ``model`` for serving without this package: a TensorFlow SavedModel, or a TF Lite file.

    ``model``: a model pin from :func:`alexnet.alexnet_model` or a ``model_dir`` / ``alexnet.keras`` location with
    its card (a model without a card is refused: its classes' names and image size would be unknown). ``path``: the
    folder to write, a path, ``file://``, ``gs://`` or ``s3://`` location; one that exists and is not empty is
    refused unless ``overwrite`` is true and it holds an earlier export and nothing else, which is then replaced.
    ``format``: ``"savedmodel"`` (the default) or ``"tflite"`` (the SavedModel's ``pixels`` signature converted by
    ``tf.lite.TFLiteConverter.from_saved_model``: TF Lite has no image decoding). ``top``: the classes returned per
    image (at most the model's). ``board``: also publish the export in a model pin there, beside the model's
    ``alexnet.keras``, as a new version of pin ``name`` (default: the pin ``model`` came from, else ``"alexnet"``),
    unless its newest version holds this model with the same export already (that version is kept and returned);
    :func:`alexnet.alexnet_model` reads it back with ``export=True``, SHA-256 checked. Give ``path``, ``board`` or
    both.

    The SavedModel computes in float32 whatever precision the model trained in. Its ``serving_default`` signature
    takes ``images``, a batch of encoded images as strings, decodes and crops them inside the graph as
    :func:`alexnet.alexnet_predict` does, and returns per image ``indices``, ``ids``, ``names`` and
    ``probabilities`` of the ``top`` classes, best first, with ``ok`` and ``error``: an image that cannot be
    decoded gets ``ok`` false and its reason, -1 indices, empty ids and names and zero probabilities, and the
    other images their answers. The ``pixels`` signature takes float32 ``[batch, size, size, 3]`` pixels (0-255,
    already cropped to the card's size) and returns the four rankings. From plain TensorFlow::

        served = tf.saved_model.load(path).signatures["serving_default"]
        answer = served(images=tf.constant([open("cat.jpg", "rb").read()]))
        answer["names"][0], answer["probabilities"][0]

    Returns a dict: ``path`` (the location written, or None), ``format``, ``files`` (relative paths) and ``bytes``
    of the export, ``model`` (what was exported), ``image_size``, ``num_classes``, ``top``, ``signatures`` (by
    name: ``inputs`` and ``outputs``, each name to ``dtype[dims]``) and ``pin`` (``board``, ``name``, ``version``
    of the model pin published, or None).

    Its options, with their defaults:

    - ``format`` (default ``'savedmodel'``): savedmodel: a TensorFlow SavedModel; tflite: its pixels signature as a
      TF Lite file.
    - ``top`` (default ``5``): classes the export returns for each image, the most probable first (at most the
      model's).
    - ``overwrite`` (default ``False``): replace an earlier export at path (a folder holding anything else is never
      emptied).
    """
    ...


def alexnet_features(
    model: Any,
    images: Any,
    layer: Literal["flatten", "fc1", "fc2", "logits"] = "fc2",
    *,
    batch_size: int = 32,
    skip_bad: bool = False,
) -> dict[str, Any]:
    """The values of ``layer`` for each image, in the order the images are given: a row of numbers per image.

    ``model`` and ``images`` are taken as :func:`alexnet.alexnet_predict` takes them (a model pin, a ``model_dir`` or
    ``alexnet.keras`` location or, from Python, a ``keras.Model``; image files, locations, folders or encoded images),
    and each image is decoded as evaluation does, at the card's image size. ``layer`` is one of
    :data:`~alexnet.model.options.FEATURE_LAYERS`: ``"fc2"``, the default, holds the 4096 values whose distances the
    paper used to find images the network sees as alike. Its options
    (:class:`~alexnet.model.options.FeaturesOptions`) are listed below.

    Returns a dict: ``image`` (each image's name, as :func:`alexnet.alexnet_predict` gives it: its path or location,
    or ``<bytes i>``), ``layer``, ``features``, a float32 array with a row per image and a column per value of the
    layer, and ``columns``, the names of its columns (:func:`feature_columns`). Images that cannot be read or decoded
    raise one :class:`AlexnetError` naming each of them, and nothing is returned; with ``skip_bad``, they are left
    out, named in a warning.

    Its options, with their defaults:

    - ``layer`` (default ``'fc2'``): the layer whose values are returned: flatten, the last convolution's maps, max-
      pooled and pooled to 6x6, flattened (9216 values); fc1, the first hidden dense layer, after its ReLU (4096
      values at full size); fc2, the second hidden dense layer, after its ReLU (4096 values at full size): the
      paper's image similarity; logits, the class scores before the softmax (one per class).
    - ``batch_size`` (default ``32``): images scored at once.
    - ``skip_bad`` (default ``False``): leave out the images that cannot be read or decoded, with a warning naming
      each, and give the others' results (otherwise one error names them, and nothing is given).
    """
    ...


def alexnet_model(
    board: str | os.PathLike | None = None,
    name: str = "alexnet",
    version: str | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    export: bool = False,
) -> dict[str, Any]:
    """Read model pin ``name`` (its latest version, or ``version``; ``name@version`` reads that version too) from
    ``board`` and bring its file here.

    ``board`` is any board string (folder, ``file://``, ``gs://``, ``s3://``, ``https://``). The file is
    downloaded into ``cache_dir`` (default :func:`default_model_cache`) under a temporary name, checked
    against the SHA-256 in the pin's metadata and renamed into place; a file already cached is reused when its
    SHA-256 matches. A mismatch raises :class:`~alexnet.errors.IntegrityError` ("tampered or damaged") and
    leaves nothing to load. A pin that does not exist, or is not a model pin (no ``kind: model`` in its
    metadata), raises :class:`~alexnet.errors.AlexnetError`. With ``export=True`` the export the pin carries
    beside the model (``alexnet_train(model_format = "keras+savedmodel")``, :func:`alexnet.alexnet_export` with a
    board) is brought here too, checked the same way, a SavedModel extracted; a pin without one is an error.

    Returns a plain dict (a list in R): ``path`` (the local file, with the pin's card beside it), ``name``, ``version``,
    ``board``, ``cache_dir`` (the absolute ``cache_dir`` given, else None: a process that uses the dict where ``path``
    is missing, such as a Spark worker on another machine, brings the file there again, or to its own default when
    None), ``sha256``, ``bytes``, ``formats`` (what the pin carries: ``keras``, and ``savedmodel`` or ``tflite`` when it
    has an export), ``export_path`` (the local SavedModel folder or ``.tflite`` file with ``export=True``, else None),
    and the card's fields: ``image_size``, ``num_classes``, ``class_ids``, ``class_names``, ``epochs``, ``metrics`` (the
    saved epoch's), ``best_epoch`` (with ``keep_best``: the 1-based epoch the weights are from, else ``None``),
    ``board_trained_from`` (the board the model was trained from), ``categories_version``, ``weights_sha256``,
    ``created``, ``evaluation`` (``None``, or the evaluation the model's training ended with: see
    :func:`alexnet.alexnet_spark_train`'s ``evaluate``), ``initial_model`` (what its training started from) and
    ``architecture`` (``dense_units`` and ``grouped``, which a run started from it must have; ``None`` on older cards).
    Give the dict as ``model`` to :func:`alexnet.alexnet_evaluate`, :func:`alexnet.alexnet_predict` or
    :func:`alexnet.alexnet_export`.

    Its options, with their defaults:

    - ``name`` (default ``'alexnet'``): the name of the model pin read (NAME@VERSION reads that version).
    - ``version`` (default ``None``): the version of the pin read (unset: its latest).
    - ``cache_dir`` (default ``None``): where the model's files are brought, here and by a Spark worker without a
      copy of them (a folder every such machine may write; unset: a folder under each machine's user cache
      directory).
    - ``export`` (default ``False``): bring the export the pin carries beside the model too (a SavedModel
      extracted).
    """
    ...


def alexnet_predict(
    model: Any,
    images: Any,
    top: int = 5,
    *,
    batch_size: int = 32,
    skip_bad: bool = False,
) -> list[dict[str, Any]]:
    """The ``top`` most probable classes of each image, in the order the images are given.

    ``model``: a model pin from :func:`alexnet.alexnet_model`, a ``model_dir`` or ``alexnet.keras`` location,
    or (Python) a ``keras.Model``. ``images``: file paths or locations (folder files, ``file://``, ``gs://``,
    ``s3://``, ``https://``), folders (local, ``gs://``, ``s3://``: their image files, :data:`FOLDER_IMAGES`, by
    name) or encoded images (a JPEG's or PNG's ``bytes``, ``bytearray`` or ``memoryview``; R's raw vectors). Pixels
    (a NumPy array of numbers, a PIL image) are refused: encode them first. Each is decoded as evaluation does, at
    the card's image size, and scored ``batch_size`` at a time. Its options
    (:class:`~alexnet.model.options.PredictOptions`) are listed below.

    Returns one record per image and rank: ``image`` (as given, or ``<bytes i>`` for the ``i``-th image given
    as bytes, 0-based), ``rank`` (1 = most probable), ``id`` (the class's WordNet id, from the model's card),
    ``name`` and ``probability``; within an image, probabilities descend. Images that cannot be read or decoded
    raise one :class:`AlexnetError` naming each of them, and nothing is returned (images are read and predicted a
    chunk at a time: see :func:`decoded_chunks`); with ``skip_bad``, they are left out, named in a warning.

    Its options, with their defaults:

    - ``top`` (default ``5``): classes given for each image, the most probable first (a model with fewer classes
      gives all of them).
    - ``batch_size`` (default ``32``): images scored at once.
    - ``skip_bad`` (default ``False``): leave out the images that cannot be read or decoded, with a warning naming
      each, and give the others' results (otherwise one error names them, and nothing is given).
    """
    ...


def alexnet_spark_evaluate(
    spark: Any,
    model: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    crops: Literal[1, 10] = 1,
    batch_size: int = 64,
    parallel: int | None = None,
    image_size: int | None = None,
    base_port: int = 8000,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
    timeout: float | None = None,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    progress: bool = True,
    probe: bool = True,
) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ``model`` over every validation image of ``board``, split over ``workers``
    Spark barrier tasks; the same result as a one-machine :func:`alexnet.alexnet_evaluate`.

    Task ``k`` evaluates share ``k`` of ``workers`` of the validation images in a fresh Python process
    (:func:`alexnet.launch.evaluation.evaluate_work`; ``python``, default the executor's; ``env`` extra environment
    variables; fetched into ``cache_dir``, ``fetch_workers`` downloads at once); the driver adds the correct
    counts. ``model`` must be something every worker reaches: a ``model_dir`` or ``alexnet.keras`` location
    (``gs://``, ``s3://``; a local path with a non-local master gets a warning) or a model pin from
    :func:`alexnet.alexnet_model` (a worker without its file fetches it from its board, into the ``cache_dir`` given
    to :func:`alexnet.alexnet_model`, which it must be able to write, else its own user cache); a loaded
    ``keras.Model`` is an error.
    ``spark`` is a SparkSession or SparkContext (or a :class:`~alexnet.launch.session.SparkToStart`, started once the
    checks have passed).

    The same job as a training's: before anything runs, the checks of :func:`alexnet.launch.job.plan_job`, then,
    with ``probe``, a short job checks that the executors' Python imports alexnet and TensorFlow. While the
    workers score, their progress is shown here (``progress``). ``timeout`` bounds each launch in seconds (the
    Spark job is cancelled, and the error says so). An evaluation is idempotent: when a worker fails, the job is
    launched again whole, up to ``retries`` times. Returns the dict of :func:`alexnet.alexnet_evaluate`
    (``seconds``: the stage's wall time; ``images_per_second``: the workers' own, the images over the slowest
    worker's seconds of scoring) plus ``workers``, ``per_worker`` (each worker's ``seconds`` of scoring among them)
    and ``attempt``.

    ``options`` are, by name, the evaluation's (:class:`alexnet.model.options.EvaluationOptions`) and the launch
    options (:class:`alexnet.launch.options.LaunchOptions`), with their defaults:

    - ``crops`` (default ``1``): 1: the centre crop; 10: the four corners and the centre of the image resized to
      256/224 of the crop, and their mirrors (the paper's).
    - ``batch_size`` (default ``64``): images scored at once.
    - ``parallel`` (default ``None``): images decoded at once (unset: one per CPU this process may use).
    - ``image_size`` (default ``None``): the side of the crop scored (unset: the size the model trained at last; a
      model trained at a lower size often scores better 32 pixels above it).
    - ``base_port`` (default ``8000``): worker k of a training listens on its host at this port + k (an evaluation's
      workers listen on none; tasks on one host must not collide; below the hosts' ephemeral ports, 32768 on Linux,
      which outgoing connections take).
    - ``cache_dir`` (default ``None``): where each worker extracts its share of the board (unset: under the user
      cache directory).
    - ``fetch_workers`` (default ``8``): parallel downloads of each worker.
    - ``timeout`` (default ``None``): seconds a launch may take before the whole job is cancelled, and not launched
      again (unset: no bound).
    - ``python`` (default ``None``): the Python each worker runs (unset: the executor's; from R, the R session's
      alexnet_python()).
    - ``env`` (default ``None``): extra environment variables of the workers' processes.
    - ``retries`` (default ``0``): launches of the job again after a failure (a training resumes from the last
      checkpoint of `checkpoint_dir`, an evaluation scores every image again); after a lost Spark worker, a relaunch
      first waits for the task slots it took (saying so), as long as Spark waits for a barrier stage's (10 minutes
      by default).
    - ``progress`` (default ``True``): show the workers' progress on the driver (from R, also how a failed worker's
      own error reaches it: sparklyr's error of the stage does not carry it).
    - ``probe`` (default ``True``): first check, in a short job, that the executors' Python imports alexnet and
      TensorFlow, naming those that do not.
    """
    ...


def alexnet_spark_train(
    spark: Any,
    workers: int,
    board: str | os.PathLike | None = None,
    *,
    evaluate: bool = False,
    crops: Literal[1, 10] = 1,
    base_port: int = 8000,
    cache_dir: str | os.PathLike[str] | None = None,
    fetch_workers: int = 8,
    timeout: float | None = None,
    python: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    retries: int = 0,
    progress: bool = True,
    probe: bool = True,
    settings: TrainSettings | None = None,
    callbacks: Sequence[Any] | None = None,
    batch_size: int = 32,
    epochs: int = 2,
    parallel: int | None = None,
    image_size: int | Sequence[int] = 224,
    image_size_epochs: int | Sequence[int] | None = None,
    learning_rate: float = 0.01,
    lr_scaling: Literal["linear", "none"] = "linear",
    lr_schedule: Literal["linear", "cosine", "step", "plateau"] = "linear",
    warmup_epochs: int | None = None,
    momentum: float = 0.9,
    weight_decay: float = 0.0005,
    lr_drop_epochs: int | Sequence[int] | None = (30, 60, 80),
    patience: int = 2,
    label_smoothing: float = 0.1,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    steps_per_epoch: int | None = None,
    validation: bool = True,
    validation_steps: int | None = None,
    keep_best: bool = False,
    cache: bool = False,
    max_bad_fraction: float = 0.01,
    check_images: bool = True,
    seed: int | None = None,
    verbose: int = 2,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    initial_model: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    train_from: Literal["conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits"] = "conv1",
    area_range: Sequence[float] = (0.08, 1.0),
    lighting: float = 0.0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    mixed_precision: bool | None = None,
    jit_compile: bool | None = None,
    collective_timeout: float | None = 1800.0,
    allreduce_precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half"] = "float32",
    allreduce_pack_mb: float = 0.0,
    accumulate_steps: int = 1,
    sync_every: int = 1,
    local_sgd_after: int = 0,
    adapt_communication: bool = False,
    largest_global_batch: int | None = None,
    progress_file: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    log_every: int = 100,
    profile_steps: Sequence[int] | None = None,
    model_pin: str | None = None,
    model_board: str | os.PathLike[str] | None = None,
    model_format: Literal["keras", "keras+savedmodel", "keras+tflite"] = "keras",
) -> SparkRun:
    """Train AlexNet on ``workers`` Spark tasks at once, each on its own partition of ``board``; with
    ``evaluate``, end with the model's evaluation on every validation image of the board, in the same job.

    One barrier task per worker (``rdd.barrier().mapPartitions``): task ``k`` runs
    :func:`alexnet.launch.training.train_work` in a fresh Python process, which fetches partition ``k`` of
    ``workers``, sets TF_CONFIG from the barrier addresses (worker ``k`` listens on its host at ``base_port + k``;
    worker 0 is the chief) and trains with ``MultiWorkerMirroredStrategy``. ``arguments`` are, by name, the job's
    options (the launch options of :class:`alexnet.launch.options.LaunchOptions`, and the training job's own,
    :class:`alexnet.launch.options.TrainingJobOptions`: ``evaluate``, ``crops``; listed with their defaults below)
    and its training settings (those of :func:`alexnet.alexnet_train`: ``epochs``, ``batch_size`` per worker,
    ``image_size``, ``checkpoint_dir`` and ``model_dir`` on storage every worker reaches (``gs://``, ``s3://``),
    ``checkpoint_every``, ``collective_timeout``, ``model_pin``, ...), or ``settings`` holds those already checked
    (:func:`alexnet.launch.training.worker_settings`). ``spark`` is a SparkSession or SparkContext (or a
    :class:`~alexnet.launch.session.SparkToStart`, started once the checks below have passed); ``python`` the worker's
    Python (default: the executor's); ``env`` extra environment variables for the worker processes; ``timeout``
    bounds each launch in seconds; ``callbacks`` are Keras callbacks every worker trains with (they travel to the
    workers pickled).

    With ``evaluate``, after the last epoch each worker scores the validation images of its partition with the
    model it holds (``crops``: 1, the centre crop, or 10), and the driver adds the counts: every category is in
    one partition, so the evaluation equals :func:`alexnet.alexnet_evaluate` of the saved model on one machine
    over every validation image of the board. The evaluation is recorded in the model card: in ``model_dir``'s
    ``alexnet-model.json``, and, with ``model_pin``, in the pin's one new version, which the evaluation's
    ``model_pin`` names.

    Before anything runs on the cluster: more workers than Spark task slots (or than categories), an
    unreachable board, an output location that cannot be written, or checkpoints in ``checkpoint_dir`` that every
    worker would refuse to resume (of another checkpoint format, written for another model, or trained on other
    classes than the board's, told by the history file and the model card beside them) is an error, in the words
    the workers would use; with ``probe``, a short job
    then checks that the executors' Python imports alexnet and TensorFlow, and names those that do not. While
    the workers train, the chief's progress is shown here (``progress``), and each worker's while it evaluates.
    When a worker fails, Spark stops the others; with ``retries``, the stage is launched again (up to that many
    times) and training resumes from the last checkpoint of ``checkpoint_dir``. The error of the last failure
    leads with the worker's own Python error and says where its whole log is.

    Returns a :class:`SparkRun`: a list of one dict per worker, in worker order (see
    :func:`alexnet.launch.training.train_work`), each with ``attempt`` (1 when the first launch succeeded) and ``log``
    (``host:path``, where the worker's log is kept on its host); every worker ends with the same weights
    (``history["weights_sha256"]``). Its ``evaluation`` is the dict of
    :func:`alexnet.alexnet_evaluate` with ``workers``, ``per_worker`` and ``model_pin`` (with ``evaluate``; else
    ``None``).

    The job's options, with their defaults:

    - ``evaluate`` (default ``False``): after the last epoch, each worker scores its partition's validation images
      with the model it holds: the evaluation of every validation image of the board, recorded in the model card and
      in the one version of `model_pin` the job writes.
    - ``crops`` (default ``1``): with `evaluate`, 1: the centre crop; 10: the four corners and the centre of the
      image resized to 256/224 of the crop, and their mirrors (the paper's).
    - ``base_port`` (default ``8000``): worker k of a training listens on its host at this port + k (an evaluation's
      workers listen on none; tasks on one host must not collide; below the hosts' ephemeral ports, 32768 on Linux,
      which outgoing connections take).
    - ``cache_dir`` (default ``None``): where each worker extracts its share of the board (unset: under the user
      cache directory).
    - ``fetch_workers`` (default ``8``): parallel downloads of each worker.
    - ``timeout`` (default ``None``): seconds a launch may take before the whole job is cancelled, and not launched
      again (unset: no bound).
    - ``python`` (default ``None``): the Python each worker runs (unset: the executor's; from R, the R session's
      alexnet_python()).
    - ``env`` (default ``None``): extra environment variables of the workers' processes.
    - ``retries`` (default ``0``): launches of the job again after a failure (a training resumes from the last
      checkpoint of `checkpoint_dir`, an evaluation scores every image again); after a lost Spark worker, a relaunch
      first waits for the task slots it took (saying so), as long as Spark waits for a barrier stage's (10 minutes
      by default).
    - ``progress`` (default ``True``): show the workers' progress on the driver (from R, also how a failed worker's
      own error reaches it: sparklyr's error of the stage does not carry it).
    - ``probe`` (default ``True``): first check, in a short job, that the executors' Python imports alexnet and
      TensorFlow, naming those that do not.
    """
    ...


def alexnet_train(
    batch_size: int = 32,
    epochs: int = 2,
    data: Mapping[str, Any] | None = None,
    strategy: str | tf.distribute.Strategy | None = None,
    parallel: int | None = None,
    *,
    image_size: int | Sequence[int] = 224,
    image_size_epochs: int | Sequence[int] | None = None,
    learning_rate: float = 0.01,
    lr_scaling: Literal["linear", "none"] = "linear",
    lr_schedule: Literal["linear", "cosine", "step", "plateau"] = "linear",
    warmup_epochs: int | None = None,
    momentum: float = 0.9,
    weight_decay: float = 0.0005,
    lr_drop_epochs: int | Sequence[int] | None = (30, 60, 80),
    patience: int = 2,
    label_smoothing: float = 0.1,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    steps_per_epoch: int | None = None,
    validation: bool = True,
    validation_steps: int | None = None,
    keep_best: bool = False,
    cache: bool = False,
    max_bad_fraction: float = 0.01,
    check_images: bool = True,
    seed: int | None = None,
    verbose: int = 1,
    dense_units: int = 4096,
    dropout: float = 0.5,
    grouped: bool = False,
    initial_model: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    train_from: Literal["conv1", "conv2", "conv3", "conv4", "conv5", "fc1", "fc2", "logits"] = "conv1",
    area_range: Sequence[float] = (0.08, 1.0),
    lighting: float = 0.0,
    precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half", "mixed_bfloat16",
        "mixed_float16"] | None = None,
    mixed_precision: bool | None = None,
    jit_compile: bool | None = None,
    collective_timeout: float | None = 1800.0,
    allreduce_precision: Literal["float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half"] = "float32",
    allreduce_pack_mb: float = 0.0,
    accumulate_steps: int = 1,
    sync_every: int = 1,
    local_sgd_after: int = 0,
    adapt_communication: bool = False,
    largest_global_batch: int | None = None,
    progress_file: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    log_every: int = 100,
    profile_steps: Sequence[int] | None = None,
    model_pin: str | None = None,
    model_board: str | os.PathLike[str] | None = None,
    model_format: Literal["keras", "keras+savedmodel", "keras+tflite"] = "keras",
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
) -> dict[str, Any]:
    """Train AlexNet on ``data`` and return its history.

    ``data`` is the result of ``imagenet_partition()`` or a dict with ``image`` (paths), ``category``
    (one per image) and ``categories`` (see :func:`alexnet.input.inputs.training_data`); the model always has the
    *global* ``num_classes`` outputs. ``strategy`` is ``None``/``"default"`` (one device), ``"mirrored"`` (all
    GPUs here), ``"multi_worker"`` (all workers of ``TF_CONFIG``) or a ``tf.distribute.Strategy`` object.
    ``parallel`` is the number of images decoded at once (``None``: one per CPU this process may use).

    Batches: ``batch_size`` is per replica (per GPU, or per machine without GPUs); one step trains on the
    global batch ``batch_size * replicas``, where replicas count every device of every worker. With
    ``"multi_worker"`` over 16 machines of 4 GPUs and ``batch_size = 32``, a step trains on
    32 x 64 = 2048 images, 128 of them from each machine's own partition, and the gradients are
    averaged over all of them.
    An epoch is ``steps_per_epoch`` steps, by default as many whole batches as this machine's images
    fill (each pass over the images sees each once, in a new order; see
    :func:`alexnet.input.pipeline.train_dataset`). With several workers the default is the same on every
    worker: the smallest partition's images (from the partition sizes ``imagenet_partition()`` returns,
    else exchanged between the workers) over this machine's share of the global batch; workers with more
    images see a different subset of them in each epoch.

    Optimisation is the paper's: SGD, ``momentum`` 0.9, ``weight_decay`` 5e-4 added to the gradient, a change
    of rate taking effect at once (:class:`alexnet.train.model.DecayedSGD`), on labels smoothed by
    ``label_smoothing`` (0.1; 0 is the paper's hard labels). After any warm-up the rate follows ``lr_schedule``:
    ``"linear"`` (the default) straight down to zero at the last step, ``"cosine"`` down to zero along half a
    cosine, ``"step"`` divided by 10 at each epoch of ``lr_drop_epochs``, ``"plateau"`` divided by 10 when
    validation top-1 has not improved for ``patience`` epochs (the paper's rule; every worker decides alike, from
    the history, and a resumed run continues the same curve; see :mod:`alexnet.train.schedule`).
    ``learning_rate`` is the rate for a global batch of 128, the paper's (0.01). With ``lr_scaling = "linear"``
    (the default) the rate follows the linear scaling rule of Goyal et al. (2017): it is multiplied by
    ``global batch / 128`` (0.04 for 16 workers of batch 32) and reached by a linear warm-up from
    ``learning_rate`` over ``warmup_epochs`` (default: 5, at most half the epochs, when the rate grows more than
    twice, else none; below a global batch of 128 the rate only shrinks, and a warm-up stays at the scaled rate);
    ``"none"`` keeps ``learning_rate`` whatever the batch. The rate is set before every step; the history's
    ``schedule`` holds the rate of each epoch's last step.

    ``image_size`` is one image side (224, the paper's), or several trained in order (progressive resizing:
    ``(128, 160, 224)``): the epochs are split evenly among them, later sizes taking any left over, unless
    ``image_size_epochs`` gives the epochs at each size (``(4, 4, 2)``, adding up to ``epochs``). Small
    images make the early epochs several times cheaper; the last size is the one validation uses and the model
    card records. One model takes every size (AlexNet's last feature map is pooled to 6x6 whatever the input; see
    :mod:`alexnet.model.network`), and the history's ``schedule`` holds each epoch's size
    (:mod:`alexnet.train.schedule`).

    ``precision`` is what the layers compute in: ``None`` (measured: where the hardware has more than float32,
    a few training steps of this model are timed in each format, in a child process, and a 16-bit one is taken
    only when it is at least 1.1 times as fast; remembered per machine, see :mod:`alexnet.train.measure`; the
    workers of a cluster agree on one, else float32), ``"float32"``, ``"bfloat16"`` (mixed, float32 weights) or
    ``"float16"`` (mixed, loss-scaled); see :mod:`alexnet.train.precision`. The older ``mixed_precision`` flag maps
    onto it (``True``: float16, ``False``: float32). The history's ``params`` say which precision was used, why, and
    the rates measured. ``jit_compile`` compiles the training step with XLA; unset, it is on for a run of one GPU
    only: off on CPUs, and off under ``"multi_worker"`` and with several replicas, where XLA-compiled steps that
    all-reduce the gradients have failed (tensorflow/tensorflow#58961, #45940); ``params``' ``jit_compile`` and
    ``jit_compile_reason`` say which and why.

    Validation images (``val_image`` in ``data``, when ``validation``) are scored after each epoch as
    :func:`alexnet.alexnet_evaluate` scores them with ``crops = 1``: the centre crop at the last image size, in
    order, every image once (see :mod:`alexnet.train.validation`). With several workers, or several replicas,
    every worker scores its own validation images and the counts are added over all of them: ``val_accuracy``,
    ``val_top5_accuracy`` and ``val_loss`` (the mean loss per image) are over every worker's validation images,
    each counted once, the same on every worker. Every worker runs as many validation steps as the largest
    share fills, the smaller shares padded with images that count for nothing (at most one batch of padding
    beyond the largest share); ``validation_steps`` caps the steps, each worker then scoring its first
    ``validation_steps * batch_size * replicas here`` images. Validation runs when any worker has validation
    images. Images are checked once before training (``check_images``): bad ones are skipped and listed in
    ``bad_images``; more than ``max_bad_fraction`` of them raises :class:`~alexnet.errors.BadImagesError` naming
    them. Validation never skips an image: one that still cannot be decoded stops the run, naming the problem.

    ``checkpoint_dir`` (a folder, ``file://``, ``gs://`` or ``s3://``, like a board): a checkpoint is written
    after every epoch and, with ``checkpoint_every``, every that many steps inside an epoch; running again
    with the same ``checkpoint_dir`` resumes where the last checkpoint was written, and the returned history
    covers every epoch. A run resumed inside an epoch ends it with the batches of a new pass over the images (a new
    order; with ``seed``, the order the run began with), so that in that epoch some images come twice and others not,
    and its training loss and accuracy count the steps after the resume alone; the learning rate, the optimizer's
    state and the epochs after it go on as they would have. Once every epoch asked for is done, running again
    trains nothing: it returns the run as it ended (its history, its model saved again, its ``model_pin`` version
    when the pin's newest holds these weights, rather than a second one) and logs so; a larger ``epochs`` trains
    further. ``model_dir`` (same kinds of string;
    default: ``checkpoint_dir``) receives the trained model as ``alexnet.keras``, with its card beside it as
    ``alexnet-model.json``
    (:class:`alexnet.model.card.ModelCard`: image size, the id and name of every class by label, epochs done,
    final metrics, the data's board and ``categories`` version, weights digest, creation time). A location
    that cannot be written is an error before any training.

    ``model_pin`` (a pin name, such as ``"alexnet"``): after training, the model is saved without its
    optimizer state (what inference needs; resuming is the checkpoints' job) and published as a new version of
    that pin on ``model_board`` (default: the board ``data`` came from), with the card, its kind (``model``),
    and the file's SHA-256 and size as the pin's metadata. The name must not be one of the data board's own
    pins (``categories``, ``bad_images``, a WordNet id, ``val-<wnid>``), and the board must be writable:
    both are checked before training. With ``keep_best`` (it needs validation images) the model saved, its card
    (``best_epoch``) and its pin are those of the epoch with the best validation top-1, kept beside the
    checkpoints so that a resumed run still knows it; without, the last epoch's. ``model_format =
    "keras+savedmodel"`` (or ``"keras+tflite"``) puts the model's :func:`alexnet.alexnet_export` (the top 5 classes
    per image, in float32) into the same pin version, beside ``alexnet.keras``: what serves it without this package.

    ``log_dir`` (same kinds of string as ``checkpoint_dir``) receives TensorBoard event files: per epoch
    ``epoch/loss``, ``epoch/accuracy``, ``epoch/top5_accuracy`` (with more than 5 classes), the ``val_`` ones,
    ``epoch/learning_rate``, ``epoch/images_per_second`` and ``epoch/image_size``; every ``log_every`` steps
    ``step/loss``, ``step/accuracy``, ``step/learning_rate`` and ``step/images_per_second``, at the global step (which
    continues across resumed runs). ``profile_steps = (first, last)`` (R: ``c(first, last)``) runs
    TensorFlow's profiler over those steps of this call (counted from 1), into ``plugins/profile/`` under
    ``log_dir``. Logs on a bucket are uploaded after each epoch and at the end (see
    :mod:`alexnet.train.tensorboard`). Watch with ``tensorboard --logdir <log_dir>``, which the core's
    ``tensorboard`` extra installs (TensorBoard reads a folder and ``gs://``; copy ``s3://`` logs to a folder).

    ``cache`` keeps the compressed image bytes in memory after the first epoch. ``dense_units``,
    ``dropout`` and ``grouped`` change the model (see :func:`alexnet.model.network.build_alexnet`);
    ``area_range`` is the share of each image that a random training crop covers and ``lighting`` the strength of
    the AlexNet paper's PCA colour noise (see :func:`alexnet.input.decode.decode_for_training`); ``callbacks``
    are extra Keras callbacks (each is given the model the run ends with, with ``set_model``, also when no epoch
    was left to train; they come after the run's own, so that what they add to an epoch's logs is in neither the
    history nor TensorBoard's log);
    ``progress_file`` is where the chief reports its progress as lines of JSON while it trains (a file path,
    or ``tcp://host:port`` of a launcher's monitor).

    Several workers: ``strategy = "multi_worker"`` reads ``TF_CONFIG`` (see :mod:`alexnet.train.cluster`)
    and bounds each step, validation step, average and agreement of the workers by ``collective_timeout`` seconds
    (two minutes more for a first one, which may build its TensorFlow function first; one thread of the run keeps the
    bound, :mod:`alexnet.train.watchdog`), so that a worker that hangs makes the others fail instead of waiting for
    ever (with one :class:`~alexnet.train.lost.WorkerLostError` naming
    the worker lost, what to give when a slow link starved it, and how to resume); a worker whose heartbeats stop
    for a minute (or ``collective_timeout``, if less) is declared lost, where TensorFlow alone allows 10 s, which a
    busy worker can miss. A ``MultiWorkerMirroredStrategy`` object keeps its own communication options and TensorFlow's
    heartbeat timeout; the run warns when it has no collective timeout, when it has one (TensorFlow keeps a thread
    sleeping for it per collective operation) or when it keeps the 10 s. A worker of
    ``"multi_worker"`` stops on SIGTERM as a run of one process does (TensorFlow's set-up would otherwise take the
    signal over and train on; see :func:`alexnet.train.joining.keeping_sigterm`). Only the chief
    (worker 0) keeps checkpoints, the model, its card and pin, and TensorBoard logs; for a resumable
    multi-worker run, ``checkpoint_dir`` must be storage every worker reaches (a bucket, or the same path on a
    shared file system), as every worker restores from it.

    Returns a dict: ``params`` (settings and sizes; ``train_images`` this worker's, ``val_images`` the
    validation images each epoch counts over every worker, ``worker_val_images`` this worker's share of them;
    ``communication`` and ``allreduce_bytes_per_step``: what the replicas exchange (the GPUs of a machine as the
    workers of a cluster: ``allreduce_precision`` and ``allreduce_pack_mb`` act between them), in words and in bytes
    each replica puts into the all-reduce a step (0 with one replica); with several workers ``allreduce_seconds`` and
    ``compute_seconds``: one exchange and one step's computation, each timed alone before training,
    ``sixteen_bit_allreduce_seconds``: with float32 on the wire, the same exchange timed in 16 bits,
    ``hidden_seconds``: where packs overlap the backward pass on every worker, what of the exchange a step with
    packs hid, timed in the wire format the chief's timing advises (counted by the advice on GPUs only),
    ``communication_efficiency``, the share of linear scaling they give if none of the exchange overlaps, and
    below 0.9 ``advised_settings``, the settings that would send less in the order to take them (16-bit gradients
    where timed a tenth faster or more, packs where they overlap the backward pass,
    ``accumulate_steps`` up to a global batch of ``micro_batches_up_to`` (``largest_global_batch``, or unset
    1,024 on ImageNet's training images and as many times fewer on fewer), then local SGD, whose cost in accuracy
    is to be measured first), with
    ``communication_advice``, the same in words, logged as a warning when training starts; see
    :func:`alexnet.train.advice.advise`; and ``adapted_settings``, what the run took of that advice with
    ``adapt_communication = True``, the chief's decision on every worker, the settings, timings, estimate and advice
    in ``params`` being then those it trained with),
    ``metrics`` (per-epoch lists: ``loss``, ``accuracy``, ``top5_accuracy`` and, with validation, ``val_loss``,
    ``val_accuracy``, ``val_top5_accuracy`` and ``val_images``, the images they cover), ``schedule`` (what each
    epoch trained with, apart from the metrics: ``image_size`` and ``learning_rate`` per epoch, and ``summary``,
    the schedule on one line), ``model_path`` (or ``None``), ``bad_images`` (paths), ``skipped_images`` (the paths
    of the images this worker's pipeline could not read or decode during training and skipped, one by one: changed
    since the check before training; each is said as a warning at the end of its epoch, and more than
    ``max_bad_fraction`` of this worker's images stop the run with :class:`~alexnet.errors.BadImagesError`, on
    every worker at that epoch's end) and
    ``images_per_second``
    (training images per second on this machine, over the epochs after the first when there are several,
    validation left out; ``None`` when no step ran, as in a run that found every epoch trained before),
    ``weights_sha256`` (a digest of the final weights, the same on every
    worker of a multi-worker run), ``weights_agree`` (with several workers, whether every worker ended with the
    chief's weights, compared at the end; a warning names those that did not; ``None`` with one), ``card`` (the
    model card as a dict) and ``model_pin`` (``board``, ``name`` and ``version`` of the pin written, or ``None``).

    Every setting, with its default (the declaration, :class:`alexnet.train.settings.TrainSettings`):

    - ``batch_size`` (default ``32``): images per batch on each replica (GPU, or worker without GPUs); the global
      batch is this times the replicas.
    - ``epochs`` (default ``2``): passes over the data.
    - ``parallel`` (default ``None``): images decoded at once (unset: one per CPU this process may use).
    - ``image_size`` (default ``224``): image side in pixels (at least 63; 224, the paper's), or several trained in
      order (128, 160, 224).
    - ``image_size_epochs`` (default ``None``): epochs at each size of `image_size`, adding up to `epochs` (unset:
      split evenly, later sizes taking the epochs left over).
    - ``learning_rate`` (default ``0.01``): the learning rate for a global batch of 128 (the paper's 0.01), scaled
      with the batch by `lr_scaling`.
    - ``lr_scaling`` (default ``'linear'``): how the rate follows the global batch: "linear" multiplies
      `learning_rate` by global batch / 128 (reached by a warm-up), "none" keeps it.
    - ``lr_schedule`` (default ``'linear'``): how the rate ends after the warm-up: "linear" straight down to zero at
      the last step, "cosine" down to zero along half a cosine, "step" divided by 10 at `lr_drop_epochs`, "plateau"
      divided by 10 when the validation top-1 has not improved for `patience` epochs (the paper).
    - ``warmup_epochs`` (default ``None``): epochs of linear warm-up to the scaled rate (unset: 5, at most half the
      epochs, when the rate grows more than twice, else 0).
    - ``momentum`` (default ``0.9``): SGD momentum.
    - ``weight_decay`` (default ``0.0005``): L2 weight decay added to the gradient of every kernel.
    - ``lr_drop_epochs`` (default ``(30, 60, 80)``): with lr_schedule = "step": epochs (0-based) at whose start the
      rate is divided by 10 (from 1: epoch 0 starts at the peak).
    - ``patience`` (default ``2``): with lr_schedule = "plateau": epochs without a better validation top-1 before
      the rate is divided by 10, 3 times at most (the paper's).
    - ``label_smoothing`` (default ``0.1``): the share of each label's probability spread evenly over all classes
      (0: the paper's hard labels).
    - ``checkpoint_dir`` (default ``None``): checkpoints, to resume after an interruption (one run at a time, in a
      folder or a bucket: a second waits up to a minute for it, then stops).
    - ``model_dir`` (default ``None``): where the trained model is saved (unset: `checkpoint_dir`), replacing one
      there (said before the run); not another run's folder of checkpoints, whose model it would replace.
    - ``checkpoint_every`` (default ``None``): also checkpoint every this many steps inside an epoch (needs
      `checkpoint_dir`); a run resumed from one ends that epoch with batches of a new pass over the images (with
      `seed`, in the order the run began with), and that epoch's training metrics count its steps after the resume
      alone.
    - ``steps_per_epoch`` (default ``None``): training steps per epoch (unset: as many whole batches as the images
      fill, at least one).
    - ``validation`` (default ``True``): evaluate the validation images (centre crop at the last image size) after
      each epoch, every worker's, each once.
    - ``validation_steps`` (default ``None``): validation steps per epoch (unset: as many as every validation image
      once takes; set: at most this many, covering the first `validation_steps` x `batch_size` x its replicas of
      each worker's images).
    - ``keep_best`` (default ``False``): save, and publish, the weights of the epoch with the best validation top-1
      rather than the last epoch's (the model card says which epoch).
    - ``cache`` (default ``False``): keep the compressed image bytes in memory after the first epoch (as much memory
      as this worker's images take on disk: said when more than half of what is free).
    - ``max_bad_fraction`` (default ``0.01``): the share of images that may be unusable (skipped) before training
      stops with an error naming them.
    - ``check_images`` (default ``True``): check every image once before training and skip the bad ones.
    - ``seed`` (default ``None``): random seed of the weights and of the order and crops of the images.
    - ``verbose`` (default ``1``): Keras fit verbosity (0 silent, 1 progress bar, 2 one line per epoch); 1 gives a
      line per epoch too where no bars are drawn (ALEXNET_PROGRESS=0) or standard output is not a terminal.
    - ``dense_units`` (default ``4096``): units of each of the two hidden dense layers (the paper's 4096).
    - ``dropout`` (default ``0.5``): dropout rate after each hidden dense layer.
    - ``grouped`` (default ``False``): split conv2, conv4 and conv5 into two groups, as the paper's two GPUs.
    - ``initial_model`` (default ``None``): start from the weights of this trained model: the location of a
      model_dir or alexnet.keras, or, from R and Python, a model pin as alexnet_model returns it; its last layer's
      weights are kept for the classes both have and the other classes start afresh, so a model trained on ImageNet
      starts training on categories of your own (a resumed run, which must name the same model, takes its
      checkpoint's weights without reading it).
    - ``train_from`` (default ``'conv1'``): the first layer that learns: the layers before it keep the weights they
      start with, those of `initial_model` ("fc1": only the dense layers learn, "logits": only the last).
    - ``area_range`` (default ``(0.08, 1.0)``): the least and most share of an image that a random training crop
      covers.
    - ``lighting`` (default ``0.0``): the AlexNet paper's colour augmentation: each training image's light shifted
      along the three principal components of ImageNet's colours, by weights drawn with this standard deviation (the
      paper's 0.1; 0: none).
    - ``precision`` (default ``None``): what the layers compute in (unset: the hardware's; bfloat16 and float16 are
      mixed precision).
    - ``mixed_precision`` (default ``None``): the older form of `precision`: on means "float16", off "float32".
    - ``jit_compile`` (default ``None``): compile the training step with XLA (unset: on one GPU; off on CPUs, under
      multi_worker and with several replicas, where XLA-compiled steps that all-reduce the gradients have failed
      (tensorflow/tensorflow#58961, #45940); set, on or off as asked).
    - ``collective_timeout`` (default ``1800.0``): seconds a worker waits for the others in a step, validation step
      or agreement (two minutes more for the first, which may build its function first), or for them all to join at
      the start, before failing (unset: for ever); a worker silent for as long, or for a minute if less, is declared
      lost.
    - ``allreduce_precision`` (default ``'float32'``): the number format of the gradients on the wire between
      replicas (the GPUs of a machine, and the workers): "float32", or "bfloat16" / "float16", half the bytes (each
      replica's gradients rounded to 16 bits and every partial sum of the all-reduce rounded again; the sum comes
      back as float32).
    - ``allreduce_pack_mb`` (default ``0.0``): all-reduce the gradients between replicas in packs of about this many
      megabytes, last layer first, so that packs travel while the backward pass computes the rest (0: one all-reduce
      of every gradient after the backward pass).
    - ``accumulate_steps`` (default ``1``): micro-batches of `batch_size` whose gradients are added up before one
      all-reduce and optimizer step: a step trains `accumulate_steps` x `batch_size` images a replica, and the rate
      and schedules count these steps.
    - ``sync_every`` (default ``1``): local SGD: each worker takes this many optimizer steps alone, then the workers
      average their weights and momentum (1: synchronous training, the gradients all-reduced every step; one worker:
      nothing to average).
    - ``local_sgd_after`` (default ``0``): with `sync_every` above 1: epochs trained synchronously before local SGD
      begins (post-local SGD: the models the workers train alone drift apart most while the rate is high, early in
      training).
    - ``adapt_communication`` (default ``False``): with several workers: take what the measurement before training
      advises of 16-bit gradients, packs where they overlap the backward pass (on GPUs, and on CPUs with two or more
      inter-op threads) and `accumulate_steps` (up to `largest_global_batch`, and as many micro-batches as an
      epoch's whole steps take leaving out at most one batch in 20), as the chief decides, on every worker (local
      SGD, which changes what is learnt, is only advised; a resumed run keeps what it took when it began).
    - ``largest_global_batch`` (default ``None``): with several workers: the largest global batch (images of one
      optimizer step over every worker) that the micro-batches advised before training, and taken by
      `adapt_communication`, may make (unset: 1024 on ImageNet's 1,281,167 training images, the largest AlexNet
      keeps its accuracy at with the rate scaled linearly, and as many times fewer on fewer images, down to none; it
      never stops a batch you set yourself, which the chief warns about beyond 1024 and beyond this bound).
    - ``progress_file`` (default ``None``): where the chief reports progress as lines of JSON (a file, or
      tcp://host:port of a launcher's monitor).
    - ``log_dir`` (default ``None``): TensorBoard logs, watched with `tensorboard --logdir`.
    - ``log_every`` (default ``100``): write step scalars to `log_dir` every this many steps.
    - ``profile_steps`` (default ``None``): profile these training steps (first, last; counted from 1) into
      `log_dir`.
    - ``model_pin`` (default ``None``): after training, publish the model (without optimizer state) as a new version
      of this pin.
    - ``model_board`` (default ``None``): board of `model_pin` (unset: the board the data came from).
    - ``model_format`` (default ``'keras'``): what `model_pin` carries: "keras", alexnet.keras (what evaluation and
      prediction read); "keras+savedmodel" or "keras+tflite", also its alexnet_export() beside it, for serving
      without this package.
    """
    ...


def imagenet_partition(
    partition: int = 0,
    total: int = 16,
    board: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 8,
    verify: bool = False,
    retries: int = 3,
    validation: bool = True,
) -> dict[str, Any]:
    """Fetch partition ``partition`` (0-based) of ``total`` from ``board`` into a local cache.

    Categories are split by :func:`alexnet.data.partition.partition_categories` (balanced image counts,
    deterministic). Their zips are downloaded ``workers`` at a time, each retried ``retries`` times on
    transient errors, checked against the sha256 in the ``categories`` pin and extracted into
    ``cache_dir``; cached categories are reused without any download. A cached category counts when every
    file is there with its size; with ``verify``, every file's CRC-32 is checked too (which reads them all),
    and a damaged category is fetched again. Which partition (:class:`~alexnet.data.options.PartitionOptions`)
    and the options of a fetch (:class:`~alexnet.data.options.FetchOptions`) are listed below.

    Returns a dict: ``image`` (absolute paths), ``category`` (wnid per image), ``categories`` (this
    partition's wnids), ``label`` (global index per image), ``num_classes`` (global count), ``val_image``,
    ``val_label``, ``val_category`` (this partition's validation images, empty when the board has none or
    ``validation`` is false), ``partition``, ``total``, ``partition_sizes`` and ``val_partition_sizes``
    (training and validation images of every partition, in partition order), ``board``, ``cache_dir``,
    ``downloaded_bytes`` and ``seconds``; ``left_out_at_upload`` (the validation images of this partition's
    categories the upload left out, as the board's ``bad_images`` pin names them, which an evaluation of the
    partition says; None when the board does not say or ``validation`` is false); and for the model's card,
    ``class_ids`` and ``class_names`` (the id and name of every category of the board, by global index) and
    ``categories_version`` (the version of the board's ``categories`` pin, ``None`` when the board does not tell it);
    ``resize``: the short side the upload stored the images at (``None``: as they were, or the board does not say),
    which training and evaluation warn of when they would enlarge their crops of it
    (:func:`~alexnet.data.options.stored_side_problem`).

    Its options, with their defaults:

    - ``partition`` (default ``0``): which partition, from 0 to `total` - 1 (0-based).
    - ``total`` (default ``16``): how many partitions (workers) the categories are split into.
    - ``cache_dir`` (default ``None``): where the zips are extracted, one board's to a local folder, new, empty or a
      cache made before (unset: the board's own folder under the user's cache directory); one filled before and
      shared read-only is read as it is.
    - ``workers`` (default ``8``): downloads at the same time.
    - ``verify`` (default ``False``): check every cached file's CRC-32 against the one its zip recorded (which reads
      every file) and fetch a damaged category again; off, names and sizes are checked.
    - ``retries`` (default ``3``): attempts after the first for each download that fails for a transient reason,
      their waits doubling from about 0.5 s (a board that does not answer at all is given up on once they are used,
      or about 30 s after it stopped if that comes first, a few minutes when it keeps its connections open without a
      word, said after 30 s without a byte; the same fetch run again then resumes).
    - ``validation`` (default ``True``): also fetch the partition's validation images.
    """
    ...


def imagenet_synthetic(
    dest: str | os.PathLike[str],
    *,
    classes: int = 10,
    images_per_class: int = 100,
    val_per_class: int = 10,
    seed: int = 0,
    quirks: bool = False,
    max_side: int | None = None,
    layout: Literal["kaggle", "archives", "kaggle_zip", "kaggle_targz", "parquet", "imagefolder", "folders"] = "kaggle",
) -> dict[str, Any]:
    """Write a synthetic ImageNet into ``dest``, in Kaggle's layout or another one people have ImageNet in.

    In Kaggle's layout it writes ``ILSVRC/Data/CLS-LOC/train/<wnid>/<wnid>_<n>.JPEG``, ``ILSVRC/Data/CLS-LOC/val/
    ILSVRC2012_val_<8 digits>.JPEG``, ``LOC_synset_mapping.txt`` and ``LOC_val_solution.csv`` (one box per
    validation image: the drawn object). Categories are the ILSVRC2012 classes in label order (the first
    ``classes`` of :func:`~alexnet.data.classes.imagenet_classes`), then made-up ids ``n2xxxxxxx``. The other
    layouts hold the same images byte for byte (:mod:`alexnet.data.layouts`), each what
    :func:`~alexnet.data.upload.imagenet_upload` reads from ``dest``. ``dest``, a folder to write into, must not
    already hold a synthetic ImageNet. Its options (:class:`~alexnet.data.options.SyntheticOptions`) are listed
    below; the same options give byte-identical files.

    Returns:
        ``{"path", "layout", "classes", "images", "val_images", "bytes", "categories", "quirks"}``: the absolute
        path of ``dest``; ``images`` counts every training file written (quirk files included); ``bytes`` is the
        size of all image files; ``categories`` the sorted wnids; ``quirks`` maps each kind (``cmyk``,
        ``grayscale``, ``png``, ``truncated``, ``empty``) to its file path (inside its archive for an archive
        layout: ``<archive>/<member>``), empty when ``quirks`` is false.

    Its options, with their defaults:

    - ``classes`` (default ``10``): number of categories (at most 1000 in every layout but kaggle and folders).
    - ``images_per_class`` (default ``100``): training images per category.
    - ``val_per_class`` (default ``10``): validation images per category (0: none; the folders layout has none).
    - ``seed`` (default ``0``): random seed: the same seed and options give byte-identical files.
    - ``quirks`` (default ``False``): also write the odd files real ImageNet has, in the first category and on top
      of images_per_class: a CMYK JPEG, a grayscale JPEG, a PNG named .JPEG, a JPEG cut off mid-scan and an empty
      file.
    - ``max_side`` (default ``None``): shrink every image so that its longer side is at most this many pixels
      (unset: ImageNet's sizes); small images make quick experiments and tests.
    - ``layout`` (default ``'kaggle'``): the layout written: kaggle (Kaggle's download extracted), archives (the
      official ILSVRC2012 training tar, validation tar and devkit), kaggle_zip (Kaggle's zip as downloaded),
      kaggle_targz (Kaggle's earlier download: its tree in one tar.gz, the LOC_ files beside it), parquet (Hugging
      Face's imagenet-1k shards), imagefolder (train/<wnid>/ and val/<wnid>/ folders, as torchvision's ImageFolder
      reads them) or folders (one folder per WordNet id, without validation images).
    """
    ...


def imagenet_upload(
    source: str | os.PathLike | None = None,
    board: str | os.PathLike | None = None,
    *,
    workers: int = 8,
    min_images: int = 0,
    resize: int | None = None,
    quality: int = 90,
    keep_versions: int | None = None,
    scratch: str | os.PathLike[str] | None = None,
    retries: int = 3,
    val_share: float = 0.0,
    max_pixels: int = 89478485,
    path: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Upload the ImageNet at ``source`` to ``board``, one zip per category, read in place, resumably.

    Args:
        source: the ImageNet source, a local path or a ``gs://``/``s3://`` URL, in any layout of
            :mod:`alexnet.data.sources`: the official ILSVRC2012 archives (or the folder holding them), Kaggle's
            zip (or its folder), Hugging Face's parquet shards' folder, Kaggle's extracted tree, torchvision's
            ``train/``, ``val/`` tree or a folder of ``<wnid>/`` folders.
        board: where to upload (see :mod:`alexnet.storage.board`); ``None`` is ``$ALEXNET_BOARD`` or the
            local default.
        path: the old name of ``source``, still accepted by name with a ``DeprecationWarning``; giving both is an
            :class:`~alexnet.errors.AlexnetError`.
        options: how the images are uploaded (:class:`~alexnet.data.options.UploadOptions`, listed below).

    A source that gives no validation images (a training tar alone, parquet shards without
    ``validation-*.parquet``, a folder of ``<wnid>/`` folders) is uploaded with a warning naming the files of its
    layout that hold them (:func:`alexnet.data.sources.no_validation`); added, an upload run again skips the training
    categories and uploads the validation images.

    Returns:
        A report: ``board``, ``source``, ``layout`` (the source's, as :mod:`alexnet.data.sources` names it),
        ``categories`` (count on the board), ``uploaded``/``skipped`` (category ids), ``val_uploaded`` (the ids
        whose validation images were uploaded), ``excluded`` (``{"category", "images"}`` under ``min_images``),
        ``images``,
        ``val_images``, ``bytes`` (of all zips), ``uploaded_bytes``, ``seconds``, ``mb_per_s`` (uploaded
        MB per second), ``bad_images`` (``{"category", "split", "file", "reason"}``), ``pruned_versions``
        (old versions deleted under ``keep_versions``).

    Its options, with their defaults:

    - ``workers`` (default ``8``): categories fetched, packed and published at the same time while one thread reads
      the source in order; at most one of them is packed per CPU at a time, the others fetching or publishing.
    - ``min_images`` (default ``0``): leave out categories with fewer good training images than this (a category
      without any good image is left out always).
    - ``resize`` (default ``None``): re-encode images so that their short side is at most this many pixels, at least
      63 (CMYK, grayscale and PNG images become RGB JPEGs): a smaller bucket and faster decoding when training
      (unset: keep every good image byte for byte).
    - ``quality`` (default ``90``): JPEG quality of re-encoded images.
    - ``keep_versions`` (default ``None``): once the upload is complete, keep only this many versions (the newest)
      of each pin it wrote or kept, so that uploading changed data again (with resize, say) does not leave the old
      copy on the board (unset: every version); a reader still holding an older categories table then no longer
      finds the versions it names.
    - ``scratch`` (default ``None``): a local folder (made if missing), on a disk with room for a few categories'
      zips, in which the upload makes its scratch folder: the zips on their way to the board (moved onto a folder
      board on the same disk instead of copied) and the categories of Kaggle's tar.gz or of shuffled parquet shards
      waiting to be packed (unset: the system's temporary folder, TMPDIR).
    - ``retries`` (default ``3``): attempts after the first for each transient error of the board, their waits
      doubling from about 0.5 s (a board that does not answer at all is given up on once they are used, or about 30
      s after it stopped if that comes first, a few minutes when it keeps its connections open without a word; the
      same upload run again then resumes).
    - ``val_share`` (default ``0.0``): for a folder of category folders, which holds no validation images: about
      this share of each category's images held out as its validation images, each image by a hash of its name, so
      that the same ones stay held out when photos are added, and at least one of every category of two images or
      more (0: none).
    - ``max_pixels`` (default ``89478485``): the most pixels (width x height) an image may have to be stored, at
      most 89,478,485 (the most that training, evaluation and prediction decode): a larger image is sized from its
      header, without being decoded, and left out as a bad image, unless `resize` shrinks it within this (images of
      up to 178,956,970 pixels are shrunk).
    """
    ...


def imagenet_validation(
    board: str | os.PathLike | None = None,
    partition: int = 0,
    total: int = 1,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 8,
    verify: bool = False,
    retries: int = 3,
) -> dict[str, Any]:
    """Fetch the validation images of ``board`` (all of them, or share ``partition`` of ``total``) into a local cache.

    Only the ``val-<wnid>`` pins are fetched, into the cache :func:`imagenet_partition` uses (downloads,
    checks and reuse are the same). The categories that have validation images are split by
    :func:`alexnet.data.partition.partition_categories` on their validation image counts, so that every share
    holds about as many images; every such category lands in exactly one share, and the shares of ``total``
    together hold every validation image once. ``total`` may not exceed the number of those categories. Which
    share (:class:`~alexnet.data.options.ValidationPartitionOptions`: a partition's, but all of them unless told
    otherwise) and the options of a validation fetch (:class:`~alexnet.data.options.ValidationFetchOptions`: a
    fetch's, but for ``validation``) are listed below.

    Returns a dict: ``val_image`` (absolute paths), ``val_label`` (global index per image), ``val_category``
    (wnid per image), ``categories`` (this share's wnids), ``num_classes`` (every category on the board),
    ``class_ids`` and ``class_names`` (every category's, by global index, as :func:`imagenet_partition` gives them),
    ``board``, ``cache_dir``, ``partition``, ``total`` and ``left_out_at_upload`` (the validation images of these
    categories the upload left out, as the board's ``bad_images`` pin names them, share 0 also counting those of the
    categories left without any, so that the shares add up to the board's: logged when there are some; None when the
    board does not say) and ``resize`` (the short side the images were stored at, as :func:`imagenet_partition` gives
    it). An :class:`AlexnetError` when the board has no validation images.

    Its options, with their defaults:

    - ``partition`` (default ``0``): which share of the validation images, from 0 to `total` - 1 (0-based).
    - ``total`` (default ``1``): how many shares the categories that have validation images are split into (1: all
      of them).
    - ``cache_dir`` (default ``None``): where the zips are extracted, one board's to a local folder, new, empty or a
      cache made before (unset: the board's own folder under the user's cache directory); one filled before and
      shared read-only is read as it is.
    - ``workers`` (default ``8``): downloads at the same time.
    - ``verify`` (default ``False``): check every cached file's CRC-32 against the one its zip recorded (which reads
      every file) and fetch a damaged category again; off, names and sizes are checked.
    - ``retries`` (default ``3``): attempts after the first for each download that fails for a transient reason,
      their waits doubling from about 0.5 s (a board that does not answer at all is given up on once they are used,
      or about 30 s after it stopped if that comes first, a few minutes when it keeps its connections open without a
      word, said after 30 s without a byte; the same fetch run again then resumes).
    """
    ...
