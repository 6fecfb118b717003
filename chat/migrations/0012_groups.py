"""Groups (issue 50): per-group quotas and the chat profiles a group may use (``GroupPolicy`` beside
Django's own ``auth.Group``), and the directory entry of an account that logs in through LDAP."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("chat", "0011_search_skips_streaming"),
        ("monitor", "0012_metric_minute_node"),
    ]

    operations = [
        migrations.AddField(
            model_name="account",
            name="directory_dn",
            field=models.CharField(blank=True, default="", max_length=512),
        ),
        migrations.AddField(
            model_name="account",
            name="disabled_by_directory",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="GroupPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("turns_per_day", models.PositiveIntegerField(blank=True, null=True, verbose_name="turns per day")),
                (
                    "tokens_per_day",
                    models.PositiveBigIntegerField(blank=True, null=True, verbose_name="tokens per day"),
                ),
                (
                    "group",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="policy", to="auth.group"
                    ),
                ),
                (
                    "profiles",
                    models.ManyToManyField(blank=True, related_name="group_policies", to="monitor.serverprofile"),
                ),
            ],
        ),
    ]
