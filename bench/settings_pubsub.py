"""chatsite's settings with CHANNEL_LAYER_BACKEND=pubsub, for the bench's pubsub2 setup."""

import os

os.environ["CHANNEL_LAYER_BACKEND"] = "pubsub"

from chatsite.settings import *  # noqa: F403
