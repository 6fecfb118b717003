"""Django settings: every value comes from the environment, with working defaults."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from qwenweb.env import VAR_DIR, env_bool, env_int, env_list
from qwenweb.ldap_settings import ldap_settings
from qwenweb.network import lan_addresses, node_name_from_host, served_hosts
from qwenweb.oidc_settings import oidc_settings
from qwenweb.secrets import file_secret

BASE_DIR = Path(__file__).resolve().parent.parent


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or file_secret(VAR_DIR / "secret_key", nbytes=48)
DEBUG = env_bool("DJANGO_DEBUG", False)
# Where people reach the box: the addresses `make run` announces, loopback and the box's names.
# DJANGO_ALLOWED_HOSTS / DJANGO_CSRF_TRUSTED_ORIGINS (comma lists) replace the derived ones.
QWENWEB_PORT = env_int("QWENWEB_PORT", 8000)
QWENWEB_LAN_ADDRESSES = lan_addresses()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ",".join(served_hosts()))
# Behind a TLS-terminating proxy (QWENWEB_BEHIND_TLS=1): cookies only over HTTPS, HSTS, and the
# proxy's X-Forwarded-Proto believed. A plain-HTTP LAN install cannot have these (see README).
BEHIND_TLS = env_bool("QWENWEB_BEHIND_TLS", False)
CSRF_TRUSTED_ORIGINS = env_list(
    "DJANGO_CSRF_TRUSTED_ORIGINS",
    ",".join(
        f"https://{host}" if BEHIND_TLS else f"http://{host}:{QWENWEB_PORT}"
        for host in ALLOWED_HOSTS
        if host != "*" and not host.startswith(".")
    ),
)
SESSION_COOKIE_SECURE = BEHIND_TLS
CSRF_COOKIE_SECURE = BEHIND_TLS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS else None
SECURE_SSL_REDIRECT = BEHIND_TLS and env_bool("QWENWEB_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("QWENWEB_HSTS_SECONDS", 31_536_000) if BEHIND_TLS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = BEHIND_TLS and env_bool("QWENWEB_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = False
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Silenced only for a plain-HTTP LAN install (nothing to redirect to); behind TLS every deploy check applies.
SILENCED_SYSTEM_CHECKS = (
    []
    if BEHIND_TLS
    else [
        "security.W004",  # SECURE_HSTS_SECONDS: HSTS on plain HTTP would lock people out
        "security.W008",  # SECURE_SSL_REDIRECT: there is no HTTPS to redirect to
        "security.W012",  # SESSION_COOKIE_SECURE: the cookie must travel over http://
        "security.W016",  # CSRF_COOKIE_SECURE: likewise
    ]
)
# Every response (qwenweb.csp): only the app's own scripts, styles, images (plus data:/blob: images),
# sockets and form targets; no plugins, no <base>, never framed.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "img-src 'self' data: blob:",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "monitor",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "qwenweb.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "chat.web.password_required.PasswordChangeRequired",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one username from
# one address, that pair is locked for LOGIN_COOLOFF_MINUTES. The address is the socket's peer
# (REMOTE_ADDR): no forwarded header is trusted, as the app is not behind a proxy.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_FAILURE_LIMIT = env_int("QWENWEB_LOGIN_FAILURE_LIMIT", 5)
LOGIN_COOLOFF_MINUTES = env_int("QWENWEB_LOGIN_COOLOFF_MINUTES", 15)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "chat.web.login_views.locked_out"
# Directory login (LDAP / Active Directory, django-auth-ldap), off while QWENWEB_LDAP_URL is empty: every
# QWENWEB_LDAP_* is read in qwenweb/ldap_settings.py (docs/accounts.md), which adds its backend after the local one.
globals().update(_DIRECTORY := ldap_settings(os.environ, AUTHENTICATION_BACKENDS))
# OIDC login (mozilla-django-oidc), off while QWENWEB_OIDC_ISSUER is empty: every QWENWEB_OIDC_* is read in
# qwenweb/oidc_settings.py (docs/accounts.md), which adds its backend last.
globals().update(_PROVIDER := oidc_settings(os.environ, AUTHENTICATION_BACKENDS))

ROOT_URLCONF = "qwenweb.urls"
ASGI_APPLICATION = "qwenweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

SQLITE_PATH = VAR_DIR / "db.sqlite3"
DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{SQLITE_PATH}", conn_health_checks=True)}
# SQLite connections are kept per thread, not opened for each save, sample and check (docs/performance.md).
# A database server's are closed at the end of each request (and API call).
IS_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 600 if IS_SQLITE else 0)
if IS_SQLITE:
    # WAL lets readers and one writer work at once; the busy timeout rides out short locks.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:index"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
TIME_ZONE = os.environ.get("TZ_NAME", "UTC")
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# The fair queue, answers' live state, the dashboard's samples, Celery's broker and results. No
# Channels layer: every socket's events come from its own consumer, so a Redis restart closes none.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Documents (extraction, OCR, summaries: minutes each) have a worker of their own (supervisord
# program "documents"), so downloads and profile loads never wait behind a long PDF.
DOCUMENTS_QUEUE = "documents"
CELERY_TASK_ROUTES = {
    "chat.tasks.ingest_document": {"queue": DOCUMENTS_QUEUE},
    "chat.tasks.summarize_document": {"queue": DOCUMENTS_QUEUE},
}

# The one llama-server: where it listens and the key it wants (never sent to a browser).
LLAMA_SERVER_URL = os.environ.get("LLAMA_SERVER_URL", "http://127.0.0.1:8081")
LLAMA_API_KEY = os.environ.get("LLAMA_API_KEY") or file_secret(VAR_DIR / "llama_api_key", prefix="sk-local-")
LLAMA_REQUEST_TIMEOUT_S = float(os.environ.get("LLAMA_REQUEST_TIMEOUT_S", "600"))
# A CA certificate (PEM) trusted besides the system's for https:// llama-servers (remote profiles): a
# LAN server's self-signed certificate. Certificates are always verified.
LLAMA_CA_FILE = os.environ.get("LLAMA_CA_FILE", "")

# Model files, and the one the seeded profiles and `make run` use.
MODELS_DIR = Path(os.environ.get("QWENWEB_MODELS_DIR", VAR_DIR / "models")).resolve()
DEFAULT_MODEL_FILE = os.environ.get("QWENWEB_DEFAULT_MODEL", "gemma-3-270m-q4_k_m.gguf")
# Router mode: profiles kept loaded at once (the router gets one more, so a changed
# profile loads before the one it replaces goes away).
# --threads for profiles left at -1 (llama-server's own choice, measured fastest: bench/cpu_bench.py threads_<n>_tps=).
LLAMA_DEFAULT_THREADS = env_int("QWENWEB_LLAMA_THREADS", -1)
LLAMA_MODELS_MAX = env_int("QWENWEB_MODELS_MAX", 1)
LLAMA_EMBED_MODELS_MAX = env_int("QWENWEB_EMBED_MODELS_MAX", 2)  # embedders/rerankers loaded at once, beside chat's
LLAMA_STOP_TIMEOUT_S = env_int("QWENWEB_STOP_TIMEOUT_S", 10)
PROFILE_LOAD_TIMEOUT_S = env_int("QWENWEB_PROFILE_LOAD_TIMEOUT_S", 600)
# After a change goes live, answers still being written by the old revision get this long to finish.
PROFILE_DRAIN_S = env_int("QWENWEB_PROFILE_DRAIN_S", 60)
LLAMA_LOG_FILE = VAR_DIR / "log" / "llama-server.log"
# Each node's watchdog (in its llama-server supervisor) looks this often for a startup profile whose
# instance died, and loads it again; 0: never (monitor.router.watchdog).
WATCHDOG_INTERVAL_S = env_int("QWENWEB_WATCHDOG_INTERVAL_S", 15)
# "HH:MM" (server time): restart llama-server once a day (slow VRAM growth on some drivers); empty: never.
LLAMA_DAILY_RESTART = os.environ.get("QWENWEB_DAILY_RESTART", "")

# Chat limits, named to the user when they are hit.
CHAT_MAX_MESSAGE_CHARS = env_int("QWENWEB_MAX_MESSAGE_CHARS", 32_000)
CHAT_MAX_IMAGE_BYTES = env_int("QWENWEB_MAX_IMAGE_BYTES", 8 * 1024 * 1024)
CHAT_IMAGE_MAX_EDGE = 512
CHAT_MAX_ANSWER_TOKENS = env_int("QWENWEB_MAX_ANSWER_TOKENS", 1024)
# One chat WebSocket frame: a base64 image is 4/3 of its bytes; room for the text and the envelope.
CHAT_MAX_FRAME_CHARS = CHAT_MAX_MESSAGE_CHARS * 4 + CHAT_MAX_IMAGE_BYTES * 4 // 3 + 4096
# Daphne drops the socket (1009) on a bigger message, before the app could name its limit: set it
# above the app's so a frame over CHAT_MAX_FRAME_CHARS (up to this) gets the app's message.
# `python -m qwenweb.serve` passes it to Daphne; nothing else starts the web server.
WEBSOCKET_MAX_MESSAGE_BYTES = env_int("QWENWEB_WEBSOCKET_MAX_MESSAGE_BYTES", 2 * CHAT_MAX_FRAME_CHARS)
# Answers a person may have being written or queued at once, and may start a minute.
CHAT_TURNS_IN_FLIGHT = env_int("QWENWEB_TURNS_IN_FLIGHT", 2)
CHAT_TURNS_PER_MINUTE = env_int("QWENWEB_TURNS_PER_MINUTE", 20)
# Daily quotas per person (chat answers and API requests are turns; tokens are prompt + output),
# reset at midnight server time (TIME_ZONE). 0: no limit. Staff may set other figures per person or group.
QUOTA_TURNS_PER_DAY = env_int("QWENWEB_TURNS_PER_DAY", 0)
QUOTA_TOKENS_PER_DAY = env_int("QWENWEB_TOKENS_PER_DAY", 0)
# Sign-up (its mode is set by staff on the users page): attempts per address an hour, invite links' life.
SIGNUPS_PER_HOUR = env_int("QWENWEB_SIGNUPS_PER_HOUR", 10)
INVITE_DAYS = env_int("QWENWEB_INVITE_DAYS", 7)
CHAT_SAVE_INTERVAL_S = float(os.environ.get("QWENWEB_SAVE_INTERVAL_S", "0.6"))  # stored text <= 1 s behind
# Text reaches a page at most once per this many ms (20 pictures a second; its CPU: docs/performance.md),
# llama-server's stream read on the same clock (monitor/llama/wire.py); the first text and other events go at once.
CHAT_FRAME_S = env_int("QWENWEB_CHAT_FRAME_MS", 50) / 1000
# The OpenAI gateway's clock (0: every read as it comes; its CPU: docs/performance.md); first bytes go at once.
API_FRAME_S = env_int("QWENWEB_API_FRAME_MS", 50) / 1000
# The fair queue (monitor/serving/queue.py): leases refreshed every QUEUE_REFRESH_S, and at once when
# Redis went away (monitor/serving/leases.py), so a restarted Redis has them back within its grace (a
# frozen holder's come back after QUEUE_LEASE_S; a dead process's are freed by its successor at once); a waiter looks
# again every QUEUE_POLL_S (its grant wakes it) and loses its place after QUEUE_STALE_S unheard; after a
# Redis restart nothing is granted for QUEUE_GRACE_S (holders put their leases back first); a request
# waits QUEUE_REDIS_WAIT_S for a Redis that is down.
QUEUE_LEASE_S = float(os.environ.get("QWENWEB_QUEUE_LEASE_S", "15"))
QUEUE_REFRESH_S = float(os.environ.get("QWENWEB_QUEUE_REFRESH_S", "5"))
QUEUE_POLL_S = float(os.environ.get("QWENWEB_QUEUE_POLL_S", "2"))
QUEUE_STALE_S = float(os.environ.get("QWENWEB_QUEUE_STALE_S", "10"))
QUEUE_GRACE_S = env_int("QWENWEB_QUEUE_GRACE_S", 2)
QUEUE_REDIS_WAIT_S = float(os.environ.get("QWENWEB_QUEUE_REDIS_WAIT_S", "30"))
# This box as an inference node (its host's name by default). A follow-up waits for the node that holds
# its conversation's cache at most this long (and never longer than a prompt pass elsewhere would take).
NODE_NAME = os.environ.get("QWENWEB_NODE_NAME") or node_name_from_host()
POOL_AFFINITY_MAX_WAIT_S = float(os.environ.get("QWENWEB_POOL_AFFINITY_MAX_WAIT_S", "60"))
# An answer whose server died or froze goes on from its text so far on a node serving the same model file
# (chat/conversations/resume.py): it waits at most RESUME_WAIT_S for one (the same box once its instance is
# back counts); a node the pool marks out releases its answers, looked at every POOL_OUT_CHECK_S of silence.
RESUME_WAIT_S = float(os.environ.get("QWENWEB_RESUME_WAIT_S", "60"))
POOL_OUT_CHECK_S = float(os.environ.get("QWENWEB_POOL_OUT_CHECK_S", "1"))
# Nodes (docs/nodes.md): where the private Redis listens (nodes on other boxes: add the LAN address), tokens' life.
REDIS_BIND = os.environ.get("QWENWEB_REDIS_BIND", "127.0.0.1")
NODE_TOKEN_HOURS = env_int("QWENWEB_NODE_TOKEN_HOURS", 24)
NODE_JOINS_PER_HOUR = env_int("QWENWEB_NODE_JOINS_PER_HOUR", 20)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"redact_secrets": {"()": "qwenweb.redaction.RedactSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact_secrets"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        **{name: {"level": "WARNING"} for name in ("httpx", "httpcore", "httpx2", "httpcore2")},
        "mcp": {"level": "WARNING"},  # the MCP SDK, client of the servers staff register (chat/tools/mcp)
    },
}
CHAT_ORPHAN_AFTER_S = env_int("QWENWEB_ORPHAN_AFTER_S", 900)  # a 'streaming' answer not written this long: died
# Answers are written by the web process that streams them. With one web process per box (supervisord's
# `web`), one that starts marks every answer still 'streaming' as interrupted at once. A deployment with
# several web processes sharing a database must set this off (the sweep above then catches them).
WEB_SWEEP_ON_START = env_bool("QWENWEB_SWEEP_ON_START", True)
DOWNLOAD_ATTEMPTS = env_int("QWENWEB_DOWNLOAD_ATTEMPTS", 3)  # per part, each resuming where the last stopped
DOWNLOAD_READ_TIMEOUT_S = float(os.environ.get("QWENWEB_DOWNLOAD_READ_TIMEOUT_S", "60"))
DOWNLOAD_STALL_S = env_int("QWENWEB_DOWNLOAD_STALL_S", 60)  # a download's worker silent this long was killed

# The dashboard's sampler: a sample a second while a dashboard is open, every 10 s while none is;
# live minutes in Redis, minute means in the database for the history; self-test sizes.
MONITOR_SAMPLE_INTERVAL_S = float(os.environ.get("QWENWEB_SAMPLE_INTERVAL_S", "1.0"))
MONITOR_IDLE_SAMPLE_INTERVAL_S = float(os.environ.get("QWENWEB_SAMPLE_IDLE_INTERVAL_S", "10.0"))
MONITOR_LIVE_SECONDS = env_int("QWENWEB_LIVE_SECONDS", 600)
MONITOR_HISTORY_HOURS = env_int("QWENWEB_HISTORY_HOURS", 48)
MONITOR_SELFTEST_PROMPT_TOKENS = env_int("QWENWEB_SELFTEST_PROMPT_TOKENS", 128)
MONITOR_SELFTEST_GENERATE_TOKENS = env_int("QWENWEB_SELFTEST_GENERATE_TOKENS", 32)
# A bearer token Prometheus may scrape /metrics with (besides a staff session); empty: none.
METRICS_TOKEN = os.environ.get("QWENWEB_METRICS_TOKEN", "")

# The usage ledger (chat/usage, docs/usage.md): rows older than this many days are deleted by beat, in
# batches (0: kept for ever).
USAGE_RETENTION_DAYS = env_int("QWENWEB_USAGE_RETENTION_DAYS", 400)

# OpenAI-compatible API (/v1/): request size (images travel as base64), requests a key may have at once.
API_MAX_BODY_BYTES = env_int("QWENWEB_API_MAX_BODY_BYTES", 20 * 1024 * 1024)
API_KEY_CONCURRENCY = env_int("QWENWEB_API_KEY_CONCURRENCY", 4)
API_RERANK_MAX_DOCUMENTS = env_int("QWENWEB_API_RERANK_MAX_DOCUMENTS", 1000)  # documents one /v1/rerank may rank
API_MAX_TOKENS = env_int("QWENWEB_API_MAX_TOKENS", 4096)  # max_tokens above it is refused; absent, it is sent
API_KEY_RPM = env_int("QWENWEB_API_KEY_RPM", 120)  # requests per key in any 60 seconds
MAX_API_KEYS_PER_USER = env_int("QWENWEB_MAX_API_KEYS_PER_USER", 10)  # keys not revoked

# Request bodies (qwenweb.body_limit, while they stream in): /v1/ takes API_MAX_BODY_BYTES, the
# document upload DOCUMENT_MAX_BYTES plus the multipart envelope, every other request this much.
HTTP_MAX_BODY_BYTES = env_int("QWENWEB_HTTP_MAX_BODY_BYTES", 1024 * 1024)
MULTIPART_OVERHEAD_BYTES = 64 * 1024

from qwenweb.document_settings import *  # noqa: E402, F403  (uploads, extraction, summaries)
from qwenweb.knowledge_settings import *  # noqa: E402, F403  (collections, passages, retrieval)
from qwenweb.tool_settings import *  # noqa: E402, F403  (tools in the chat, MCP servers)

HEALTH_TIMEOUT_S = float(os.environ.get("QWENWEB_HEALTH_TIMEOUT_S", "1.5"))  # each part's, in the health checks

# Backups (manage.py backup): where; "HH:MM" (server time) for a nightly one by beat (empty: none); how many kept.
BACKUP_DIR = Path(os.environ.get("QWENWEB_BACKUP_DIR", VAR_DIR / "backups"))
BACKUP_AT = os.environ.get("QWENWEB_BACKUP_AT", "")
BACKUP_KEEP = env_int("QWENWEB_BACKUP_KEEP", 7)


def daily_at(at: str) -> crontab:
    """ "HH:MM" as a beat schedule; a malformed value stops the start with the setting's name."""
    try:
        hour, minute = (int(part) for part in at.split(":"))
        return crontab(hour=hour, minute=minute)
    except ValueError as error:
        raise ImproperlyConfigured(f"QWENWEB_BACKUP_AT must be HH:MM, not {at!r}") from error


# Beat stamps its own heartbeat for the health checks at each wake, and wakes at least this often
# (its 30 s tasks wake it as often: no wake-up of its own); the health checks allow 2.5 times it.
BEAT_STAMP_S = 30.0
CELERY_BEAT_SCHEDULER = "monitor.telemetry.beat:StampingScheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = BEAT_STAMP_S
# Every periodic task, in one place (Celery beat). Task names are pinned in each tasks module.
CELERY_BEAT_SCHEDULE = {
    # What these return is for a caller who asks (the tests), not stored every time beat runs them.
    **{
        name: {"task": task, "schedule": every, "options": {"ignore_result": True}}
        for name, task, every in [
            ("sweep-orphaned-streams", "chat.tasks.sweep_orphaned_streams", 60.0),
            ("resume-stalled-downloads", "monitor.tasks.resume_stalled_downloads", 30.0),
            ("resume-stalled-documents", "chat.tasks.resume_stalled_documents", 30.0),
            ("prune-metric-history", "monitor.tasks.prune_metric_history", 3600.0),
            ("prune-usage-ledger", "chat.tasks.prune_usage_ledger", 3600.0),
            ("reembed-stale-collections", "chat.tasks.reembed_stale_collections", 120.0),
            ("recheck-directory", "chat.tasks.recheck_directory", _DIRECTORY["LDAP_RECHECK_S"]),
            ("recheck-oidc", "chat.tasks.recheck_oidc", _PROVIDER["OIDC_RECHECK_S"]),
        ]
    },
    **(
        {"nightly-backup": {"task": "monitor.tasks.nightly_backup", "schedule": daily_at(BACKUP_AT)}}
        if BACKUP_AT
        else {}
    ),
}
