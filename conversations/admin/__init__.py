"""History review: read-only conversations with their messages, transcripts and exports.

Nothing here can edit a transcript. Staff who are not superusers see it only with the view
permission on conversations (conversations.view_conversation), which brings the messages with it.

- conversations: the list, its stats and search, the transcript page and the exports;
- messages: a conversation's messages, inline; filters: the list's filters on them;
- review: who may review, and the read-only mixin;
- chat_models: the models managed here; shares: share links, which may only be revoked;
- invitations: one-use links for a person to join, made here;
- budgets: users' and groups' token budgets, and the ledger of tokens used (read only);
- audit: the audit log, view only;
- feedback: ratings of replies, each model's approval share, and their JSONL export.
"""

from conversations.admin.audit import AuditEventAdmin
from conversations.admin.budgets import BudgetAdmin, TokenUsageAdmin
from conversations.admin.chat_models import ChatModelAdmin, ChatModelForm
from conversations.admin.conversations import ConversationAdmin, Stats, as_conversations
from conversations.admin.feedback import FeedbackAdmin
from conversations.admin.filters import AnyMessageStatusFilter, EngineFilter
from conversations.admin.invitations import InvitationAdmin
from conversations.admin.messages import MessageInline
from conversations.admin.review import ReadOnlyMixin, can_review
from conversations.admin.shares import ShareLinkAdmin

__all__ = [
    "AnyMessageStatusFilter",
    "AuditEventAdmin",
    "BudgetAdmin",
    "ChatModelAdmin",
    "ChatModelForm",
    "ConversationAdmin",
    "EngineFilter",
    "FeedbackAdmin",
    "InvitationAdmin",
    "MessageInline",
    "ReadOnlyMixin",
    "ShareLinkAdmin",
    "Stats",
    "TokenUsageAdmin",
    "as_conversations",
    "can_review",
]
