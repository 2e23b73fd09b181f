from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0008_sharelink"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="origin",
            field=models.CharField(
                choices=[("chat", "Chat"), ("api", "API"), ("import", "Import")],
                default="chat",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="origin_detail",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name="conversation",
            name="external_id",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="conversation",
            name="imported_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("external_id", ""), _negated=True),
                fields=("owner", "origin_detail", "external_id"),
                name="one_import_per_source_conversation",
            ),
        ),
    ]
