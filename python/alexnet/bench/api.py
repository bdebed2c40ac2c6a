"""``alexnet_benchmark()``, the benchmark's public function: its arguments bound to the declared settings (its
signature and help are made from the declarations, :mod:`alexnet.bench.plan`), checked into a plan, and the plan run
by :func:`alexnet.bench.run.run`.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..declare import declaration
from ..errors import AlexnetError
from ..result import returns_result
from .plan import GROUPS, check_names, check_plan
from .run import run


@returns_result
def alexnet_benchmark(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Benchmark the input pipeline against a plain decode, the original pipeline and the model; name the bottleneck.

    ``data`` is a partition (``imagenet_partition()``'s result), an ImageNet folder, or ``None`` for a
    synthetic ImageNet of ``images`` images written to a temporary folder; at most ``images`` of its
    images are used. ``stages`` picks among ``decode``, ``naive``, ``naive_auto``, ``io``, ``synthetic``,
    ``train`` (the default: all six), ``fetch`` (serial against parallel download of partition
    ``fetch_partition`` of ``fetch_total`` from ``board``, with ``fetch_workers`` downloads at once) and
    ``time_to_accuracy`` (below). See :mod:`alexnet.bench.run` for what each stage measures.

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
    """
    try:
        bound = SIGNATURE.bind(*args, **kwargs)
    except TypeError as error:
        check_names([name for name in kwargs if name != "data"], "alexnet_benchmark()")
        raise AlexnetError(f"alexnet_benchmark(): {error}.") from None
    arguments = dict(bound.arguments)
    data = arguments.pop("data", None)
    return run(check_plan(arguments), data)


SIGNATURE = inspect.Signature(
    [inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                       annotation="Mapping[str, Any] | str | os.PathLike | None"),
     *(parameter for group in GROUPS.values() for parameter in declaration.parameters(group))],
    return_annotation="dict[str, Any]")
alexnet_benchmark.__signature__ = SIGNATURE  # type: ignore[attr-defined]
declaration.record_declared(alexnet_benchmark, *GROUPS.values())
alexnet_benchmark.__doc__ = (alexnet_benchmark.__doc__ or "").rstrip() + "\n\n" + "\n\n".join(
    declaration.help_lines(group, title=f"The {stage} stage's own:" if stage else "") for stage, group in GROUPS.items()
) + "\n"
