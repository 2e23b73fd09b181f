from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0028_models_in_the_page"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="reasoning",
            field=models.TextField(blank=True),
        ),
    ]
