"""Directory logins' Celery tasks: people gone or disabled in the directory disabled here (names pinned
as ``chat.tasks.<function>``, see chat.tasks)."""

from celery import shared_task

from chat.accounts.directory_check import recheck_directory as recheck_directory_people
from chat.accounts.oidc_check import recheck_oidc as recheck_oidc_people


@shared_task(name="chat.tasks.recheck_directory")
def recheck_directory() -> dict:
    """People gone or disabled in the LDAP directory disabled here (their API keys with them)."""
    result = recheck_directory_people()
    return {"checked": result.checked, "disabled": result.disabled, "enabled": result.enabled, "failed": result.failed}


@shared_task(name="chat.tasks.recheck_oidc")
def recheck_oidc() -> dict:
    """People disabled or removed at the OIDC provider disabled here (their API keys with them)."""
    result = recheck_oidc_people()
    return {
        "checked": result.checked,
        "unchecked": result.unchecked,
        "disabled": result.disabled,
        "enabled": result.enabled,
        "failed": result.failed,
    }
