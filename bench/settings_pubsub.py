"""chatsite's settings with channels-redis's pub/sub layer in place of its default (sorted-set)
Redis layer, so the bench can measure both. The bench's own choice, not a chatsite setting."""

from chatsite.settings import *  # noqa: F403
from chatsite.settings import REDIS_URL

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}
