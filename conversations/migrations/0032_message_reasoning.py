from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0027_temporary_chats"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="reasoning",
            field=models.TextField(blank=True),
        ),
    ]
