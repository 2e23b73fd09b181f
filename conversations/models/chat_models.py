"""The models users can chat with that the admin manages (CHAT_MODELS declares the others)."""

from django.db import models

from conversations.models import encryption


class ChatModel(models.Model):
    """A model users can chat with, managed in the admin (more can be declared in CHAT_MODELS:
    see conversations.engines.catalogue, which turns a row into the same ModelSpec)."""

    slug = models.SlugField(max_length=50, unique=True, help_text="Its name in the API and URLs.")
    name = models.CharField(max_length=100, help_text="The name users see in the picker.")
    backend = models.CharField(max_length=32, help_text="The engine: llamacpp, openai, vllm...")
    model_id = models.CharField(
        max_length=300,
        blank=True,
        help_text="The engine's name for the model: a GGUF path (llamacpp; empty: the embedded "
        "one), a served model (openai; empty: the first the server lists), a model id (vllm).",
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="The backend's other settings, checked against the ones it knows.",
    )
    # An upstream API key typed into the admin, as Fernet ciphertext (models.encryption); the
    # key itself is never shown back. options.api_key_env names a variable instead.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    context_tokens = models.PositiveIntegerField(default=2048)
    system_prompt = models.TextField(blank=True, help_text="The default for new conversations.")
    temperature = models.FloatField(default=0.7)
    max_tokens = models.PositiveIntegerField(default=512, help_text="Default reply length.")
    max_temperature = models.FloatField(default=2.0, help_text="The most a conversation may set.")
    max_tokens_limit = models.PositiveIntegerField(
        default=4096, help_text="The longest reply a conversation may ask for."
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, help_text="Who may use it; nobody chosen: everyone signed in."
    )
    enabled = models.BooleanField(default=True)
    vision = models.BooleanField(
        default=False,
        help_text="It reads images: attached images are sent to it (the openai backend only).",
    )
    tools = models.BooleanField(
        default=False,
        help_text="It calls tools: an API call's tools are passed on to it (the openai backend "
        "only; its server must parse the model's calls).",
    )
    # What its tokens cost, for the staff's usage page; empty: not priced.
    price_prompt_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="Cost of a million prompt tokens, in your currency (the usage page's cost).",
    )
    price_completion_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="Cost of a million reply tokens.",
    )
    position = models.PositiveIntegerField(default=0, help_text="Order in the picker.")

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    @property
    def api_key(self) -> str:
        return encryption.decrypt(self.api_key_encrypted)

    @api_key.setter
    def api_key(self, secret: str) -> None:
        self.api_key_encrypted = encryption.encrypt(secret)
