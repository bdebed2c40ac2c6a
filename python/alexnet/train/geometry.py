"""AlexNet's geometry, without TensorFlow: the feature map sizes an input leads to, and the smallest input."""

from __future__ import annotations

#: The smallest input for which the three poolings still leave a 1x1 map (defined with the other checks).
from ..checks import MIN_IMAGE_SIZE as MIN_IMAGE_SIZE


def feature_sizes(image_size: int) -> list[int]:
    """Side of the feature maps after conv1, pool1, pool2 and pool3 for a square input of ``image_size``."""
    conv1 = (image_size + 2 * 2 - 11) // 4 + 1
    pool1 = (conv1 - 3) // 2 + 1
    pool2 = (pool1 - 3) // 2 + 1
    pool3 = (pool2 - 3) // 2 + 1
    return [conv1, pool1, pool2, pool3]
