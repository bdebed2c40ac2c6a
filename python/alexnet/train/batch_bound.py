"""The global batch AlexNet keeps its accuracy at: the bound of the micro-batches a multi-worker run is advised, and
takes with ``adapt_communication`` (:func:`largest_batch`), what the advice says when it holds them back there
(:func:`held_back`), and the warning a run whose own settings go beyond it gets (:func:`large_batch_warning`)."""

from __future__ import annotations

#: The largest global batch AlexNet has been trained at on ImageNet with the learning rate scaled linearly and warmed
#: up, keeping its accuracy (You et al., 2017, who needed layer-wise rates, LARS, beyond it; ResNet-50 goes to 8,192,
#: Goyal et al., 2017): micro-batches are advised and taken up to it (:func:`largest_batch`).
LARGEST_GLOBAL_BATCH = 1024
#: ImageNet's (ILSVRC2012's) training images.
IMAGENET_TRAIN_IMAGES = 1_281_167


def largest_batch(train_images: int, asked: int | None = None) -> int:
    """The largest global batch micro-batches may make in the advice before training and in what
    ``adapt_communication`` takes, for a run of ``train_images`` training images (over every worker): ``asked``
    (``largest_global_batch``) when set; else :data:`LARGEST_GLOBAL_BATCH` for ImageNet's training images or more,
    and as many times less for fewer, which keeps an epoch the optimizer steps ImageNet has at that batch (1,251):
    on a few thousand images two micro-batches cost a run its accuracy (the README's table over 1 Gbit/s)."""
    if asked is not None:
        return int(asked)
    return max(1, min(LARGEST_GLOBAL_BATCH, LARGEST_GLOBAL_BATCH * int(train_images) // IMAGENET_TRAIN_IMAGES))


def held_back(most_batch: int, global_batch: float, train_images: int | None = None, smallest: int = 1,
              accumulate: int = 1) -> str:
    """What the advice says when it would advise more micro-batches than the bound ``most_batch``
    (:func:`largest_batch`) allows a run whose global batch is ``global_batch``. With the run's ``train_images``
    known, a bound scaled to them (no ``largest_global_batch``) below ``smallest``, the least global batch the run's
    replicas take (an image each), is said as what it is, too few images for micro-batches, not as a global batch
    no run trains at; and a bound asked for (``largest_global_batch``) is named as that. A run that takes
    ``accumulate`` micro-batches a step already is told that no more are advised, not that it takes none."""
    none = "No micro-batches" if accumulate <= 1 else f"No more micro-batches than the run's {accumulate} a step"
    why = "AlexNet loses accuracy at larger batches, and on fewer training images than ImageNet's at smaller ones."
    if most_batch >= global_batch:
        return f"Micro-batches stop at a global batch of {most_batch} (`largest_global_batch`): {why}"
    run = f"the run's is {int(global_batch)} already"
    if train_images is not None and most_batch != largest_batch(train_images):
        return f"{none}: `largest_global_batch` is {most_batch}, and {run}: {why}"
    if train_images is not None and most_batch < smallest:
        return (f"{none} on so few training images ({train_images:,}): AlexNet's largest global batch, "
                f"{LARGEST_GLOBAL_BATCH} for ImageNet's 1.28 million and as many times smaller for fewer, comes to "
                f"{most_batch} for them, less than the {smallest} replicas take at the least (the run's global batch "
                f"is {int(global_batch)}); `largest_global_batch` sets another bound: {why}")
    return (f"{none}: the largest global batch for its training images is {most_batch} "
            f"({LARGEST_GLOBAL_BATCH} for ImageNet's 1.28 million, as many times smaller for fewer; "
            f"`largest_global_batch` sets another), and {run}: {why}")


def large_batch_warning(global_batch: int, asked: int | None, rate_scaled: bool) -> str | None:
    """What to tell a run whose own settings make a global batch of ``global_batch`` images beyond
    :data:`LARGEST_GLOBAL_BATCH` (and beyond ``asked``, its ``largest_global_batch``: a bound set means the recipe
    is known to take it); ``None`` when they do not."""
    if global_batch <= max(LARGEST_GLOBAL_BATCH, asked or 0):
        return None
    return (f"A step trains a global batch of {global_batch} images (`batch_size` x `accumulate_steps` x replicas), "
            f"beyond the {LARGEST_GLOBAL_BATCH} AlexNet has kept its accuracy at"
            + (" with the learning rate scaled linearly" if rate_scaled else "")
            + " (You et al., 2017, who needed layer-wise rates beyond it): a smaller `batch_size` or fewer "
            "micro-batches keep it there; measure the cost first (alexnet_benchmark(stages = \"time_to_accuracy\")), "
            "and set `largest_global_batch` to a batch your recipe is known to take to silence this.")
