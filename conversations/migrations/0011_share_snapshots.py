"""Share links point at a ShareSnapshot stored once per state of a branch, instead of each
holding its own copy of the messages.

Live links' messages move to snapshots, one per conversation and digest; a revoked link keeps
its row and its message count but no snapshot, as a link revoked from now on does. The digest
is computed here as services.shares.snapshot_digest computes it (copied, so that this migration
keeps meaning what it meant when the code changes).
"""

import hashlib
import json
from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def digest(messages: Any) -> str:
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def links_to_snapshots(apps: Any, schema_editor: Any) -> None:
    ShareLink = apps.get_model("conversations", "ShareLink")
    ShareSnapshot = apps.get_model("conversations", "ShareSnapshot")
    for link in ShareLink.objects.order_by("pk").iterator(chunk_size=100):
        messages = link.messages if isinstance(link.messages, list) else []
        link.message_count = len(messages)
        if link.revoked_at is None:
            link.snapshot, _ = ShareSnapshot.objects.get_or_create(
                conversation_id=link.conversation_id,
                digest=digest(messages),
                defaults={"messages": messages},
            )
        link.save(update_fields=["message_count", "snapshot"])
    if schema_editor.connection.vendor == "postgresql":
        # The links' new foreign keys are checked at commit; PostgreSQL refuses to alter a table
        # with checks pending (RemoveField below), so they are made now.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def snapshots_to_links(apps: Any, schema_editor: Any) -> None:
    ShareLink = apps.get_model("conversations", "ShareLink")
    for link in ShareLink.objects.select_related("snapshot").order_by("pk").iterator(chunk_size=100):
        link.messages = link.snapshot.messages if link.snapshot is not None else []
        link.save(update_fields=["messages"])


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0010_search'),
    ]

    operations = [
        migrations.CreateModel(
            name='ShareSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(max_length=64)),
                ('messages', models.JSONField(blank=True, default=list)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='share_snapshots', to='conversations.conversation')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('conversation', 'digest'), name='share_snapshot_once_per_branch_state')],
            },
        ),
        migrations.AddField(
            model_name='sharelink',
            name='snapshot',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='links', to='conversations.sharesnapshot'),
        ),
        migrations.AddField(
            model_name='sharelink',
            name='message_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(links_to_snapshots, snapshots_to_links, elidable=False),
        migrations.RemoveField(
            model_name='sharelink',
            name='messages',
        ),
    ]
