"""Settings shared by every environment; values come from environment variables."""

from redis.exceptions import ConnectionError as RedisConnectionError

from controlplane.env import (
    BASE_DIR,
    DEFAULT_DATABASE_URL,
    DEFAULT_REDIS_URL,
    DEV_SECRET_KEY,
    database_pool,
    env,
    var_dir,
)
from controlplane.queues import all_queues
from integrations.triton.model_config.untrusted import DEFAULT_ALLOWED_BACKENDS

SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=DEV_SECRET_KEY)
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "accounts.admin_site.SwitchyardAdminConfig",  # django.contrib.admin, sign-in throttled
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_celery_beat",
    "django_htmx",
    "accounts",
    "audit",
    "models_registry",
    "deployments",
    "benchmarks",
    "telemetry",
    "releases",
    "plans",
    "health",
    "reports",
    "notifications",
    "console",
    "observability",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "controlplane.static_files.AsyncWhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before the CSRF check parses a sign-in form: a throttled IP costs no parsing.
    "accounts.admin_site.AdminLoginThrottleMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # PostgreSQL or Redis out of reach: 503 with Retry-After, not a 500 (controlplane/outages.py).
    "controlplane.outages.OutageMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
ASGI_APPLICATION = "controlplane.asgi.application"

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
                "console.alert_views.alerts_badge",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=DEFAULT_DATABASE_URL)}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("SWITCHYARD_DATABASE_CONN_MAX_AGE", default=0)
# Connections are named in pg_stat_activity, so an operator sees which process holds them.
DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = env.str(
    "SWITCHYARD_DATABASE_APPLICATION_NAME", default="switchyard"
)
# A pool of at most this many connections per process (psycopg_pool; 0: none, one connection
# per request or CONN_MAX_AGE). The web kind turns it on (deploy/containers/switchyard.sh,
# `make demo`): many sign-ins at once then queue for a connection instead of exhausting
# PostgreSQL's max_connections; a request that waits longer than the timeout fails cleanly.
SWITCHYARD_DATABASE_POOL_SIZE = env.int("SWITCHYARD_DATABASE_POOL_SIZE", default=0)
SWITCHYARD_DATABASE_POOL_TIMEOUT_S = env.float("SWITCHYARD_DATABASE_POOL_TIMEOUT_S", default=10.0)
database_pool(
    DATABASES["default"],
    size=SWITCHYARD_DATABASE_POOL_SIZE,
    timeout_s=SWITCHYARD_DATABASE_POOL_TIMEOUT_S,
)
# Threads a web process runs plain HTTP requests on (controlplane/sync_http.py): as many as
# its pool has connections, so no request waits on the pool for one another request holds.
SWITCHYARD_WEB_THREADS = env.int(
    "SWITCHYARD_WEB_THREADS", default=SWITCHYARD_DATABASE_POOL_SIZE or 10
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default=DEFAULT_REDIS_URL)


def redis_connection_options() -> dict:
    """redis-py's pools keep connections a restarted Redis dropped, and by default a command
    on one fails. A command that meets a dropped connection is sent once more on a fresh one,
    so the first requests and websockets after a restart succeed; a Redis that is down still
    fails at once (and answers 503, controlplane/outages.py)."""
    return {"retry_on_error": [RedisConnectionError]}


# Shared by every process: sign-in failure counters, API throttles, websocket tickets.
# Values are JSON, never pickle: whoever can write a key must not run code in the processes
# that read it (audit/cache_json.py; docs/SECURITY.md "The cache holds JSON").
# One pool per process (core/redis_pool.py), not one per request context as Django's own.
CACHE_OPTIONS = {
    **redis_connection_options(),
    "serializer": "audit.cache_json.JsonSerializer",
    "pool_class": "core.redis_pool.SharedConnectionPool",
}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("SWITCHYARD_CACHE_KEY_PREFIX", default="switchyard"),
        "OPTIONS": CACHE_OPTIONS,
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Argon2id first (accounts/hashers.py, docs/SECURITY.md "Password hashing"): new passwords get
# it, and a hash of any hasher below is re-hashed with it at the user's next sign-in.
PASSWORD_HASHERS = [
    "accounts.hashers.SwitchyardArgon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
LOGIN_URL = "login"
# ModelBackend, but the password hash runs with the pooled connection given back
# (accounts/backends.py): a burst of sign-ins never holds the whole pool.
AUTHENTICATION_BACKENDS = ["accounts.backends.PoolFriendlyModelBackend"]
# Sign-in and tokens (docs/SECURITY.md): failed sign-ins per username and per client IP in a
# window before sign-ins are refused with 429; the client IP comes from REMOTE_ADDR unless a
# reverse proxy that overwrites it sets this header (e.g. HTTP_X_REAL_IP).
SWITCHYARD_SIGNIN_MAX_FAILURES_PER_USER = env.int("SWITCHYARD_SIGNIN_MAX_FAILURES_PER_USER", 5)
SWITCHYARD_SIGNIN_MAX_FAILURES_PER_IP = env.int("SWITCHYARD_SIGNIN_MAX_FAILURES_PER_IP", 20)
SWITCHYARD_SIGNIN_WINDOW_S = env.int("SWITCHYARD_SIGNIN_WINDOW_S", default=300)
SWITCHYARD_CLIENT_IP_HEADER = env.str("SWITCHYARD_CLIENT_IP_HEADER", default="")
# Proxies in front that append to X-Forwarded-For (0: the header is ignored; accounts/client_ip.py).
SWITCHYARD_PROXY_COUNT = env.int("SWITCHYARD_PROXY_COUNT", default=0)
SWITCHYARD_API_TOKEN_TTL_DAYS = env.float("SWITCHYARD_API_TOKEN_TTL_DAYS", default=30.0)
SWITCHYARD_WS_TICKET_TTL_S = env.int("SWITCHYARD_WS_TICKET_TTL_S", default=60)
# Expired and revoked tokens stay listed this long (who had access, for reviews), then go.
SWITCHYARD_API_TOKEN_KEEP_DAYS = env.int("SWITCHYARD_API_TOKEN_KEEP_DAYS", default=90)
# How long an Idempotency-Key's stored answer is replayed to retries (API.md, Retries).
SWITCHYARD_IDEMPOTENCY_KEY_HOURS = env.int("SWITCHYARD_IDEMPOTENCY_KEY_HOURS", default=24)
LOGIN_REDIRECT_URL = "console:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Bootstrap and plotly.js come from the npm registry (package.json, `npm ci`). plotly.js is
# its basic bundle (scatter, bar and pie traces: every chart the console draws), a quarter
# of the full bundle's size: a page's script parse is most of a live page's opening time.
# Nothing is fetched from a CDN.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/bootstrap", BASE_DIR / "node_modules" / "bootstrap" / "dist"),
    ("vendor/plotly", BASE_DIR / "node_modules" / "plotly.js-basic-dist-min"),
]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "controlplane.openapi.SwitchyardAutoSchema",
    "EXCEPTION_HANDLER": "accounts.errors.api_exception_handler",
    # Per client IP (anonymous) or user: the token endpoint and websocket tickets.
    "DEFAULT_THROTTLE_RATES": {
        "auth": env.str("SWITCHYARD_AUTH_RATE", default="30/min"),
        "ws-ticket": env.str("SWITCHYARD_WS_TICKET_RATE", default="120/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Switchyard API",
    # The description (controlplane/api_description.md) and each operation's note are added
    # by controlplane.api_notes; docs/API.md is rendered from the result.
    "DESCRIPTION": "Control plane for fleets of NVIDIA Triton Inference Server",
    "VERSION": "2.0.0",  # CHANGELOG.md says what changed
    # One named enum per state vocabulary (API.md, Status): generated clients get real types.
    "ENUM_NAME_OVERRIDES": {
        "VersionStateEnum": "models_registry.apis.VERSION_CHECKS.states",
        "VersionStatusEnum": "models_registry.apis.VERSION_STATUSES",
        "DeploymentStateEnum": "deployments.apis.DEPLOYMENT.states",
        "DeploymentNodeStatusEnum": "deployments.apis.NODE_STATUSES",
        "BenchmarkStateEnum": "benchmarks.apis.BENCHMARK.states",
        "ReleaseStateEnum": "releases.apis.RELEASE.states",
        "ReleasePhaseEnum": "releases.state_machine.Phase",
        "PlanStateEnum": "plans.apis.PLAN.states",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.api_notes.add_operation_notes",
    ],
    # /api/docs/: Swagger UI from drf-spectacular-sidecar's static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}


def channel_layer_host(url: str) -> dict:
    """redis-py 8 reads with a 5 s socket timeout by default: exactly as long as
    channels_redis blocks waiting for a message, so an idle receive failed every 5 s.
    Read for longer than the layer blocks."""
    return {"address": url, "socket_timeout": 30, **redis_connection_options()}


CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [channel_layer_host(REDIS_URL)],
            "prefix": env.str("SWITCHYARD_CHANNEL_LAYER_PREFIX", default="switchyard"),
            # msgpack (channels_redis's default, named so it stays so): never pickle.
            "serializer_format": "msgpack",
        },
    }
}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=REDIS_URL)
# No task's return value is stored: the state lives in PostgreSQL. A task that stores its
# result makes every .delay() subscribe to the result backend first, and with Redis out of
# reach that blocks ~20 s and then leaves the process unable to queue until restarted
# (`apply_async(ignore_result=False)` where a caller wants the value).
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env.str("SWITCHYARD_CELERY_QUEUE", default="switchyard")
# JSON only, for tasks and results alike: a message planted in Redis is never unpickled.
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_RESULT_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
# Every task gets limits; long tasks (pushes, benchmarks) set their own.
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 150
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Lanes by urgency (controlplane/queues.py): release ticks, fleet work, long work, each on a
# queue of its own (`<queue>.releases`, `<queue>`, `<queue>.long`) with its own workers.
CELERY_TASK_ROUTES = ("controlplane.queues.route",)
# Seconds after which a queued release tick is dropped unrun: the beat queues a fresh one
# every second, so an old one would only repeat work (and pile up behind a slow tick).
SWITCHYARD_TICK_EXPIRES_S = env.float("SWITCHYARD_TICK_EXPIRES_S", default=5.0)
# Work leases (deployments and benchmarks): the task that runs one touches its row every
# lease / 4 seconds; a RUNNING row untouched for a whole lease has lost its worker and the
# sweep (every SWITCHYARD_SWEEP_INTERVAL_S) finishes it as failed, saying so.
SWITCHYARD_WORK_LEASE_S = env.float("SWITCHYARD_WORK_LEASE_S", default=60.0)
SWITCHYARD_SWEEP_INTERVAL_S = env.float("SWITCHYARD_SWEEP_INTERVAL_S", default=30.0)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Deep health (health/, docs/HEALTH.md): every serving version on every node
# gets one real inference per interval; live traffic is judged over a sliding window.
SWITCHYARD_PROBE_INTERVAL_S = env.float("SWITCHYARD_PROBE_INTERVAL_S", default=30.0)
SWITCHYARD_HEALTH_WINDOW_S = env.float("SWITCHYARD_HEALTH_WINDOW_S", default=60.0)
SWITCHYARD_HEALTH_MIN_REQUESTS = env.int("SWITCHYARD_HEALTH_MIN_REQUESTS", default=20)
# The success rate (%) a model without an SLA success rate must keep.
SWITCHYARD_HEALTH_MIN_SUCCESS_RATE = env.float("SWITCHYARD_HEALTH_MIN_SUCCESS_RATE", default=99.0)
SWITCHYARD_LEAK_CYCLES = env.int("SWITCHYARD_LEAK_CYCLES", default=5)
SWITCHYARD_LEAK_THRESHOLD_MIB = env.float("SWITCHYARD_LEAK_THRESHOLD_MIB", default=256.0)
SWITCHYARD_DRIFT_ALERT_PASSES = env.int("SWITCHYARD_DRIFT_ALERT_PASSES", default=3)
# The cluster page reads what every node answered from the shared cache, never the nodes
# themselves (deployments/node_status.py): beat reads them every REFRESH_S; a reading older
# than STALE_S is marked so (and one refresh queued); one is kept for KEEP_S.
SWITCHYARD_CLUSTER_STATUS_REFRESH_S = env.float("SWITCHYARD_CLUSTER_STATUS_REFRESH_S", default=5.0)
SWITCHYARD_CLUSTER_STATUS_STALE_S = env.float("SWITCHYARD_CLUSTER_STATUS_STALE_S", default=30.0)
SWITCHYARD_CLUSTER_STATUS_KEEP_S = env.float("SWITCHYARD_CLUSTER_STATUS_KEEP_S", default=3600.0)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# The one beat schedule, all of it here: each entry says why it runs at its cadence
# (docs/ARCHITECTURE.md's beat table lists them; a test compares the two).
CELERY_BEAT_SCHEDULE: dict = {
    # Reconcile every 10 s: a restarted node comes back empty in explicit mode and must be
    # rehydrated quickly; each tick is cheap (one stats call per node when nothing drifted).
    "deployments-reconcile": {"task": "deployments.reconcile_all", "schedule": 10.0},
    # Every second: active releases watch live traffic; a failing candidate must be caught
    # within a couple of scrapes. A tick of an idle system is one cheap query.
    # It fans out one `releases.tick` per active release on the releases lane; a tick still
    # queued after SWITCHYARD_TICK_EXPIRES_S is dropped (the next one is due anyway).
    "releases-tick": {
        "task": "releases.tick_active",
        "schedule": 1.0,
        "options": {"expires": SWITCHYARD_TICK_EXPIRES_S},
    },
    # Release plans advance on the same lane and cadence: one `plans.tick` per active plan.
    "plans-tick": {
        "task": "plans.tick_active",
        "schedule": 1.0,
        "options": {"expires": SWITCHYARD_TICK_EXPIRES_S},
    },
    # Every 10 s, like reconcile: a pod that starts becomes a node within one pass, and one
    # that is gone leaves its cluster and router within a pass and a router sync; a pass with
    # nothing configured reads one setting, otherwise it is one DNS lookup per cluster.
    "deployments-discover-nodes": {"task": "deployments.discover_nodes", "schedule": 10.0},
    # Every few seconds: the cluster page shows what each node answers from this reading
    # (it calls no node itself); a pass is three short calls per node, all nodes at once.
    "deployments-cluster-status": {
        "task": "deployments.cluster_status_refresh_all",
        "schedule": SWITCHYARD_CLUSTER_STATUS_REFRESH_S,
    },
    # Every 10 s, like reconcile: a node added to (or changed in) a cluster gets traffic from
    # the running router soon after reconcile has loaded its models; a no-op reads one file.
    "releases-routers-sync": {"task": "releases.routers_sync", "schedule": 10.0},
    # Every minute: a router's logs grow with every request (a shadow's samples hold client
    # bodies); checking sizes is three stat calls per router, and a minute of traffic over
    # the limit is a small part of it.
    "releases-router-logs-rotate": {"task": "releases.router_logs_rotate", "schedule": 60.0},
    # Every 5 minutes: a cost report computes the hours not yet rolled up from the minute
    # rollups, so the sooner an hour is stored the cheaper reports stay; a run with no new
    # complete hour only rebuilds the last two hours (late minutes), a few queries.
    "reports-cost-rollup": {"task": "reports.cost_rollup", "schedule": 300.0},
    # Hourly: rollup retention is in days, so an hour's lag in deleting is harmless and cheap.
    "telemetry-rollups-cleanup": {"task": "telemetry.rollups_cleanup", "schedule": 3600.0},
    # Every 2 s: the webhook outbox scan reads only rows past its cursor (and the lookback
    # window), a few indexed queries; a short cadence keeps a webhook within seconds of its row.
    "notifications-outbox-scan": {"task": "notifications.outbox_scan", "schedule": 2.0},
    # Hourly: finished webhook deliveries are kept for days, so an hour's lag is harmless.
    "notifications-deliveries-prune": {
        "task": "notifications.deliveries_prune",
        "schedule": 3600.0,
    },
    # Hourly: a key is replayed for SWITCHYARD_IDEMPOTENCY_KEY_HOURS; an hour's lag is harmless.
    "accounts-idempotency-keys-prune": {
        "task": "accounts.idempotency_keys_prune",
        "schedule": 3600.0,
    },
    # Daily: tokens are kept for days after they end, so a day's lag in deleting is harmless.
    "accounts-tokens-prune": {"task": "accounts.tokens_prune", "schedule": 24 * 3600.0},
    # Daily: stored files no version uses (and abandoned uploads) go once untouched for
    # SWITCHYARD_STORAGE_SWEEP_GRACE_S; nothing waits for the space.
    "models-registry-storage-sweep": {
        "task": "models_registry.storage_sweep",
        "schedule": 24 * 3600.0,
    },
    # Every probe interval: a version that fails while READY must show within one interval
    # (+ a few seconds); a pass costs two requests per serving version per node.
    "health-watch": {"task": "health.watch_all", "schedule": SWITCHYARD_PROBE_INTERVAL_S},
    # Every sweep interval: a deployment or benchmark whose worker died is finished within a
    # lease + one interval; a pass is two indexed queries when nothing was lost.
    "deployments-sweep-lost": {
        "task": "deployments.sweep_lost",
        "schedule": SWITCHYARD_SWEEP_INTERVAL_S,
    },
    "benchmarks-sweep-lost": {
        "task": "benchmarks.sweep_lost",
        "schedule": SWITCHYARD_SWEEP_INTERVAL_S,
    },
}

# How long /healthz waits for a Celery worker to answer a ping.
HEALTH_WORKER_PING_TIMEOUT_S = env.float("SWITCHYARD_HEALTH_WORKER_PING_TIMEOUT_S", default=1.0)
# /healthz and the console's health card answer from a check at most this old (console/health.py).
SWITCHYARD_HEALTH_CACHE_S = env.float("SWITCHYARD_HEALTH_CACHE_S", default=5.0)
# The managers' home reads this month's cost overview computed at most this long ago, once for
# every user who reads the same models (console/home.py, core/shared.py).
SWITCHYARD_HOME_CACHE_S = env.float("SWITCHYARD_HOME_CACHE_S", default=10.0)
# What many users' pages show alike and that moves by the second (a live page's opening
# history, the release managers' home) is computed at most this long ago, once for all of
# them (console/shared_pages.py, core/shared.py).
# A release plan's author may approve its own waves (four-eyes off): off by default, superusers
# included (plans/services.py).
SWITCHYARD_PLAN_SELF_APPROVAL = env.bool("SWITCHYARD_PLAN_SELF_APPROVAL", default=False)
# The console's address as people reach it ("https://switchyard.example.com"): webhook messages
# of a plan waiting for approval carry a signed link to its approval page there (none when
# unset); the link names its plan and wave and lasts this long (plans/approval_links.py).
SWITCHYARD_CONSOLE_URL = env.str("SWITCHYARD_CONSOLE_URL", default="")
SWITCHYARD_APPROVAL_LINK_MAX_AGE_S = env.int("SWITCHYARD_APPROVAL_LINK_MAX_AGE_S", default=86400)
SWITCHYARD_PAGE_SHARE_S = env.float("SWITCHYARD_PAGE_SHARE_S", default=2.0)
# The router panel's count of refused requests is read from the router's access log at most
# this often, whoever asks (releases/selectors.py `router_refused_shared`).
SWITCHYARD_ROUTER_REFUSED_CACHE_S = env.float("SWITCHYARD_ROUTER_REFUSED_CACHE_S", default=10.0)

SWITCHYARD_VAR_DIR = var_dir()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("SWITCHYARD_LOG_LEVEL", default="INFO")},
}

# Model registry: where version files live (content-addressed, immutable), upload limits,
# and the Triton release configs are checked against (fields newer than it are refused).
SWITCHYARD_STORAGE_ROOT = env.path("SWITCHYARD_STORAGE_ROOT", default=str(var_dir() / "artifacts"))
SWITCHYARD_MAX_UPLOAD_BYTES = env.int("SWITCHYARD_MAX_UPLOAD_BYTES", default=4 * 1024**3)
# Every other request body (JSON, forms): refused with 413 past this (controlplane/body_limit.py).
SWITCHYARD_MAX_BODY_BYTES = env.int("SWITCHYARD_MAX_BODY_BYTES", default=1024**2)
SWITCHYARD_MAX_ARCHIVE_FILES = env.int("SWITCHYARD_MAX_ARCHIVE_FILES", default=1000)  # and folders
# What an accepted archive may unpack to: in all, per byte of the archive (a legitimate model
# compresses far less than 100:1; a compression bomb far more), and per tar extension header
# (GNU long name, pax record) or zip member header.
SWITCHYARD_MAX_UNPACKED_BYTES = env.int("SWITCHYARD_MAX_UNPACKED_BYTES", default=8 * 1024**3)
SWITCHYARD_MAX_COMPRESSION_RATIO = env.float("SWITCHYARD_MAX_COMPRESSION_RATIO", default=100.0)
SWITCHYARD_MAX_ARCHIVE_HEADER_BYTES = env.int(
    "SWITCHYARD_MAX_ARCHIVE_HEADER_BYTES", default=64 * 1024
)
# Stored files no version references (deleted versions) and abandoned uploads are removed by
# a daily sweep once untouched for this long (an upload publishes its blobs before its row).
SWITCHYARD_STORAGE_SWEEP_GRACE_S = env.float("SWITCHYARD_STORAGE_SWEEP_GRACE_S", default=6 * 3600)
SWITCHYARD_TRITON_TARGET_VERSION = env.str("SWITCHYARD_TRITON_TARGET_VERSION", default="2.51.0")
# Uploads above this size stream to a temporary file instead of memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Talking to Triton nodes: short timeouts for reads, long ones for loads (a load is
# synchronous; a python model loads in ~0.1-1.5 s, a large one far longer).
SWITCHYARD_TRITON_TIMEOUT_S = env.float("SWITCHYARD_TRITON_TIMEOUT_S", default=5.0)
SWITCHYARD_TRITON_LOAD_TIMEOUT_S = env.float("SWITCHYARD_TRITON_LOAD_TIMEOUT_S", default=120.0)
# A load starts on a node only if the node's free memory (Triton's gauges) less the new
# versions' files leaves at least this much free (deployments/push.py): a second copy beside
# a serving one must not take the node down.
SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES = env.int(
    "SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES", default=256 * 1024 * 1024
)
# Restricted APIs (docs/operations.md, "Node keys"): control calls to a node carry its
# cluster's key in this header (lower-case: gRPC metadata keys are). A cluster without a key
# of its own uses SWITCHYARD_TRITON_DEFAULT_KEY_REF ("env:NAME" / "file:/path"; empty: none).
SWITCHYARD_TRITON_KEY_HEADER = env.str(
    "SWITCHYARD_TRITON_KEY_HEADER", default="switchyard-node-key"
)
SWITCHYARD_TRITON_DEFAULT_KEY_REF = env.str("SWITCHYARD_TRITON_DEFAULT_KEY_REF", default="")
# Secrets stored sealed (core/sealed.py: node keys, webhook signing secrets): Fernet keys,
# comma-separated, the first encrypts; empty: one derived from SECRET_KEY. A file reference
# (integrations/secrets.py) must lie under SWITCHYARD_SECRET_FILE_ROOTS.
SWITCHYARD_SECRETS_KEY = env.str("SWITCHYARD_SECRETS_KEY", default="")
SWITCHYARD_SECRET_FILE_ROOTS = env.list(
    "SWITCHYARD_SECRET_FILE_ROOTS", default=["/run/secrets", str(var_dir() / "secrets")]
)
# After the new version is READY everywhere, wait this long before retiring the old one.
SWITCHYARD_DEPLOY_DRAIN_S = env.float("SWITCHYARD_DEPLOY_DRAIN_S", default=2.0)
# Router membership (releases/routing.py `routable`): a routed node that stops answering
# stays in the router this long after reconcile last saw it up (nginx itself passes a
# refused connection to the next node meanwhile), then leaves until it serves again.
SWITCHYARD_ROUTER_DOWN_GRACE_S = env.float("SWITCHYARD_ROUTER_DOWN_GRACE_S", default=20.0)
# A router's log (access, a shadow's samples, error) above this is rotated to <name>.1 (the
# one before dropped) by beat every minute: the disk holds at most about twice it a log.
SWITCHYARD_ROUTER_LOG_MAX_BYTES = env.int(
    "SWITCHYARD_ROUTER_LOG_MAX_BYTES", default=256 * 1024 * 1024
)
# The unrouted share a release start measures (releases/selectors.py `unrouted_recent`): the
# last complete minutes of telemetry rollups against the router's access log, read from its
# end at most this many bytes back.
SWITCHYARD_UNROUTED_WINDOW_S = env.float("SWITCHYARD_UNROUTED_WINDOW_S", default=600.0)
# The window of the model's routed rate a release's start compares with what its first step
# needs (releases/warnings.py).
SWITCHYARD_ROUTED_RATE_WINDOW_S = env.float("SWITCHYARD_ROUTED_RATE_WINDOW_S", default=120.0)
SWITCHYARD_UNROUTED_LOG_BYTES = env.int("SWITCHYARD_UNROUTED_LOG_BYTES", default=16 * 1024 * 1024)
# Smoke tests of new versions run on a node of this cluster (default: any staging cluster)
# whose cluster serves nothing (docs/SECURITY.md, "Model code is untrusted").
SWITCHYARD_SMOKE_CLUSTER = env.str("SWITCHYARD_SMOKE_CLUSTER", default="")
# Backends (and platforms, through theirs) every cluster may load; any other backend only
# where a cluster allows it in its custom_backends. Each one is native code on the nodes.
# Default: python, onnxruntime, pytorch, tensorflow, tensorrt, openvino, fil, ensemble.
SWITCHYARD_ALLOWED_BACKENDS = env.list(
    "SWITCHYARD_ALLOWED_BACKENDS", default=list(DEFAULT_ALLOWED_BACKENDS)
)

# Telemetry: the collector's scrape interval (the demo uses 1 s), its per-node scrape
# timeout, how long per-minute rollups are kept, and how often it re-reads the node list.
TELEMETRY_INTERVAL_S = env.float("SWITCHYARD_TELEMETRY_INTERVAL_S", default=2.0)
TELEMETRY_SCRAPE_TIMEOUT_S = env.float("SWITCHYARD_TELEMETRY_SCRAPE_TIMEOUT_S", default=1.5)
TELEMETRY_ROLLUP_RETENTION_DAYS = env.int("SWITCHYARD_TELEMETRY_ROLLUP_RETENTION_DAYS", default=90)
TELEMETRY_TARGETS_REFRESH_S = env.float("SWITCHYARD_TELEMETRY_TARGETS_REFRESH_S", default=30.0)
# Live points the collector keeps in Redis so a live page opens with the recent past drawn
# (rollups cover whole minutes; this covers the minutes not yet rolled up).
TELEMETRY_RECENT_S = env.float("SWITCHYARD_TELEMETRY_RECENT_S", default=300.0)
# Benchmarks: limits on one run (the task's soft limit is 900 s: levels x duration stay
# below it) and the baseline tolerance of the verdict (p99 at most 1.3x production's).
BENCHMARK_MAX_CONCURRENCY = env.int("SWITCHYARD_BENCHMARK_MAX_CONCURRENCY", default=256)
BENCHMARK_MAX_LEVEL_S = env.float("SWITCHYARD_BENCHMARK_MAX_LEVEL_S", default=120.0)
BENCHMARK_MAX_TOTAL_S = env.float("SWITCHYARD_BENCHMARK_MAX_TOTAL_S", default=780.0)
BENCHMARK_BASELINE_TOLERANCE = env.float("SWITCHYARD_BENCHMARK_BASELINE_TOLERANCE", default=1.3)
# Imported results (perf_analyzer / Model Analyzer files) are shown but do not open a
# cluster's require_benchmark gate: nobody saw them run. True lets them count.
SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS = env.bool(
    "SWITCHYARD_ACCEPT_IMPORTED_BENCHMARKS", default=False
)

# Addresses the control plane connects to on a user's say-so (nodes, metrics, Prometheus,
# routers, webhooks; integrations/targets.py): when set (comma-separated CIDRs), every
# address a target names (names resolved) must lie in these networks; empty: public
# addresses only (no private, loopback, link-local...). Webhooks never reach the control
# plane's own database, Redis or broker, whatever this allows.
SWITCHYARD_ALLOWED_TARGET_NETWORKS = env.str("SWITCHYARD_ALLOWED_TARGET_NETWORKS", default="")
# Clusters whose nodes come from a DNS name (deployments/discovery.py): JSON, e.g.
# {"prod": {"dns": "triton-nodes", "http_port": 8000, "grpc_port": 8001, "metrics_port": 8002}}
SWITCHYARD_NODE_DISCOVERY = env.json("SWITCHYARD_NODE_DISCOVERY", default={})
# Folders the API may point the control plane at: a cluster's shared model repository
# (filesystem push mode; versions are written and replaced there) and a router's prefix
# folder. A path must resolve under one of these roots (comma-separated absolute paths).
SWITCHYARD_REPOSITORY_ROOTS = env.list(
    "SWITCHYARD_REPOSITORY_ROOTS", default=[str(var_dir() / "repositories")]
)
SWITCHYARD_ROUTER_ROOTS = env.list("SWITCHYARD_ROUTER_ROOTS", default=[str(var_dir() / "routers")])
# Requests the control plane builds itself (benchmarks, warm-up, smoke): elements per
# tensor and bytes per request, checked from the shapes before anything is allocated.
SWITCHYARD_MAX_TENSOR_ELEMENTS = env.int("SWITCHYARD_MAX_TENSOR_ELEMENTS", default=16 * 1024**2)
SWITCHYARD_MAX_REQUEST_BYTES = env.int("SWITCHYARD_MAX_REQUEST_BYTES", default=64 * 1024**2)
# The currency the node prices are in (reports show it; no conversion happens).
SWITCHYARD_CURRENCY = env.str("SWITCHYARD_CURRENCY", default="USD")

# GET /metrics (the control plane's own Prometheus metrics, observability/): readable with
# `Authorization: Bearer <token>` when a token is set, or from these networks without one.
# The token may come from a file instead (a container secret): SWITCHYARD_METRICS_TOKEN_FILE.
SWITCHYARD_METRICS_TOKEN = env.str("SWITCHYARD_METRICS_TOKEN", default="")
if not SWITCHYARD_METRICS_TOKEN and env.str("SWITCHYARD_METRICS_TOKEN_FILE", default=""):
    with open(env.str("SWITCHYARD_METRICS_TOKEN_FILE"), encoding="utf-8") as _token_file:
        SWITCHYARD_METRICS_TOKEN = _token_file.read().strip()
SWITCHYARD_METRICS_ALLOWED_NETWORKS = [
    n.strip()
    for n in env.list("SWITCHYARD_METRICS_ALLOWED_NETWORKS", default=["127.0.0.1/32", "::1/128"])
    if n.strip()  # an empty value allows no network: the token alone opens /metrics
]
# Celery queues whose length /metrics reports (the workers' queues).
SWITCHYARD_METRICS_QUEUES = env.list(
    "SWITCHYARD_METRICS_QUEUES", default=all_queues(CELERY_TASK_DEFAULT_QUEUE)
)

# Webhooks (notifications/, docs/WEBHOOKS.md): attempts per delivery (the first included),
# the backoff base (base, 2 x base, 4 x base, ... between attempts), the timeout of one POST,
# and how far back each outbox scan re-reads rows below its cursor (a transaction that
# commits later than this after writing its row is not seen).
SWITCHYARD_WEBHOOK_MAX_ATTEMPTS = env.int("SWITCHYARD_WEBHOOK_MAX_ATTEMPTS", default=6)
SWITCHYARD_WEBHOOK_RETRY_BASE_S = env.float("SWITCHYARD_WEBHOOK_RETRY_BASE_S", default=10.0)
SWITCHYARD_WEBHOOK_TIMEOUT_S = env.float("SWITCHYARD_WEBHOOK_TIMEOUT_S", default=5.0)
SWITCHYARD_WEBHOOK_LOOKBACK_S = env.float("SWITCHYARD_WEBHOOK_LOOKBACK_S", default=60.0)
# The delivery log keeps finished deliveries this many days.
SWITCHYARD_WEBHOOK_LOG_DAYS = env.int("SWITCHYARD_WEBHOOK_LOG_DAYS", default=30)
