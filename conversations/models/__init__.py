"""chatsite's models, one module per model (with its queryset): every name is importable from
here, as Django and the rest of chatsite expect (`from conversations.models import Message`).

- conversations: Conversation, a user's chat, and ConversationQuerySet;
- messages: Message, a turn of it, with a reply's status transitions, and MessageQuerySet;
- chat_models: ChatModel, a model managed in the admin;
- tokens: ApiToken, a personal key for the REST API and the gateway;
- preferences: UserPreferences, how the pages look for one user;
- shares: ShareLink, a read-only snapshot of a conversation behind a secret link, and the
  ShareSnapshot of messages its links share;
- sign_ins: SignIn, a session a user signed in with (its device, when last seen);
- invitations: Invitation, a one-use link to join, with its groups;
- identities: ExternalIdentity, who an account is at an identity provider (single sign-on);
- usage: TokenUsage, the ledger of tokens used, a row per user, day and model, and
  FirstTokenTimes, the replies' times to first token a day and model, in buckets;
- budgets: Budget, tokens a day and a month for one user or group;
- audit: AuditEvent, the append-only audit log;
- attachments: Attachment, a file in a message, with the text read from it, and its Kind;
- continuations: GatewayPath, a gateway message's path from its root, as a digest;
- feedback: Feedback, a thumbs up or down on a reply, with its reason, and FeedbackQuerySet.
- prompts: SavedPrompt, a user's reusable message with `{{name}}` variables, and its queryset.
- projects: Project, a named group of conversations with the settings new ones start with.
"""

from conversations.models.attachments import Attachment, AttachmentQuerySet
from conversations.models.audit import AuditEvent, AuditEventQuerySet
from conversations.models.budgets import Budget
from conversations.models.chat_models import ChatModel
from conversations.models.continuations import GatewayPath
from conversations.models.conversations import Conversation, ConversationQuerySet
from conversations.models.feedback import Feedback, FeedbackQuerySet
from conversations.models.identities import ExternalIdentity
from conversations.models.invitations import Invitation, InvitationQuerySet
from conversations.models.messages import Message, MessageQuerySet
from conversations.models.preferences import UserPreferences
from conversations.models.projects import Project, ProjectQuerySet
from conversations.models.prompts import SavedPrompt, SavedPromptQuerySet
from conversations.models.shares import ShareLink, ShareLinkQuerySet, ShareSnapshot
from conversations.models.sign_ins import SignIn
from conversations.models.tokens import ApiToken, ApiTokenQuerySet
from conversations.models.usage import FirstTokenTimes, TokenUsage

__all__ = [
    "ApiToken",
    "ApiTokenQuerySet",
    "Attachment",
    "AttachmentQuerySet",
    "AuditEvent",
    "AuditEventQuerySet",
    "Budget",
    "ChatModel",
    "Conversation",
    "ConversationQuerySet",
    "ExternalIdentity",
    "Feedback",
    "FeedbackQuerySet",
    "FirstTokenTimes",
    "GatewayPath",
    "Invitation",
    "InvitationQuerySet",
    "Message",
    "MessageQuerySet",
    "Project",
    "ProjectQuerySet",
    "SavedPrompt",
    "SavedPromptQuerySet",
    "ShareLink",
    "ShareLinkQuerySet",
    "ShareSnapshot",
    "SignIn",
    "TokenUsage",
    "UserPreferences",
]
