"""Triggers: cron schedules and webhooks that start runs of an app's published version.

Exactly one replica fires each cron tick: every replica's scheduler looks for due ticks, and
a tick fires only for the replica whose insert of its (trigger, tick) row in
`trigger_firings` commits (a unique constraint, on SQLite as on PostgreSQL); the others get
an IntegrityError and move on. Every firing is a recorded run (mode `cron` or `webhook`).

Missed ticks (the server was down, or every replica was): a tick is missed when it is more
than GRACE seconds old by the time a scheduler sees it. The trigger's `catch_up` says what
happens to missed ticks: `latest` (the default) fires the most recent one only, `skip` fires
none, `all` fires each (at most MAX_CATCH_UP, the most recent ones). Ticks that are not
missed always fire.

A webhook call (docs/security/webhooks.md) is checked before anything is written: the
trigger must have a secret, the call must be signed with it and timestamped within the
tolerance (services/webhook_signing.py), its body must be JSON and its inputs must fit the
published version's (the check published calls go through). Only then is a firing claimed,
in one transaction with the signature (a replay inside the window is refused) and under the
trigger's rate limit (firings per minute, on every replica). A claimed firing is always
settled, with its run or with the error that stopped it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Engine

from dagwright.errors import (
    AuthError,
    DagwrightError,
    InputError,
    NotFoundError,
    RetryLaterError,
)
from dagwright.registry.services import Secrets
from dagwright.runtime.executor import resolve_inputs
from dagwright.runtime.plan import CompiledFlow
from dagwright.secrets import SecretNotFoundError, check_secret_name
from dagwright.services.apps import AppService
from dagwright.services.inputs import check_input_types
from dagwright.services.runs.service import RunService
from dagwright.services.webhook_signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from dagwright.store.db import session
from dagwright.store.models import Version, utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.store.trigger_models import Trigger, TriggerFiring
from dagwright.store.triggers import TriggerRepository, WebhookClaim

if TYPE_CHECKING:
    # Queue mode only: Procrastinate and psycopg load with it (about 0.2 s at start-up).
    from dagwright.services.queue.submit import RunQueue

log = logging.getLogger(__name__)

GRACE: Final = 60.0  # seconds after its time a tick still fires as on time
MAX_CATCH_UP: Final = 100
POLL: Final = 1.0  # seconds between a scheduler's looks (cron has one-second fields)
KINDS: Final = ("cron", "webhook")
CATCH_UP: Final = ("latest", "skip", "all")
__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "TriggerService", "WebhookPolicy"]


class TriggerError(DagwrightError):
    code = "invalid_trigger"


class WebhookRateLimitedError(RetryLaterError):
    """The webhook fired its limit of times in the last minute (HTTP 429 + Retry-After)."""

    code = "webhook_rate_limited"


@dataclass(frozen=True)
class WebhookPolicy:
    """The settings webhook_tolerance and webhook_rate_limit."""

    tolerance: float = 300.0  # seconds a signed timestamp may be off; signatures kept as long
    rate_limit: int = 60  # firings of one webhook per minute


def _aware(value: datetime | None) -> datetime | None:
    # SQLite gives naive datetimes; everything is written in UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def check_schedule(cron: str, timezone: str) -> None:
    from croniter import croniter

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        message = f"unknown time zone {timezone!r} (an IANA name, e.g. Europe/Paris)"
        raise TriggerError(message) from None
    if not croniter.is_valid(cron):
        raise TriggerError(
            f"cron {cron!r} is not a valid schedule: five fields (minute hour day month "
            "weekday), or six with seconds last"
        )


def ticks_between(cron: str, timezone: str, after: datetime, until: datetime) -> list[datetime]:
    """The schedule's ticks in (after, until], in UTC; the schedule is read in `timezone`
    (so `0 9 * * *` is 9:00 local time across daylight-saving changes)."""
    from croniter import croniter

    zone = ZoneInfo(timezone)
    schedule = croniter(cron, after.astimezone(zone))
    ticks: list[datetime] = []
    while True:
        tick: datetime = schedule.get_next(datetime).astimezone(UTC)
        if tick > until:
            return ticks
        ticks.append(tick)
        if len(ticks) > 10 * MAX_CATCH_UP:  # a long downtime: older ticks are missed anyway
            ticks = ticks[-MAX_CATCH_UP:]


def due_ticks(ticks: list[datetime], now: datetime, catch_up: str) -> list[datetime]:
    """Which of the ticks to fire now, by the missed-tick policy (see the module doc)."""
    on_time = [t for t in ticks if (now - t).total_seconds() <= GRACE]
    missed = [t for t in ticks if (now - t).total_seconds() > GRACE]
    if catch_up == "skip" or not missed:
        chosen: list[datetime] = []
    elif catch_up == "latest":
        chosen = missed[-1:]
    else:
        chosen = missed[-MAX_CATCH_UP:]
    return chosen + on_time


def _pick(body: Any, path: str) -> Any:
    value = body
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise InputError(f"the webhook body has nothing at {path!r}")
    return value


def webhook_inputs(trigger: Trigger, body: Any) -> dict[str, Any]:
    """The run's inputs: the trigger's fixed inputs, and each mapped path of the body (or,
    with no mapping, the body's own keys). A caller never overrides a fixed input: a body key
    naming one is refused (a mapping cannot name one: _check refuses that trigger)."""
    inputs = dict(trigger.inputs)
    if trigger.input_map:
        for name, path in trigger.input_map.items():
            inputs[name] = _pick(body, path)
    elif isinstance(body, dict):
        fixed = sorted(set(body) & set(trigger.inputs))
        if fixed:
            raise InputError(
                f"the webhook body sets {', '.join(map(repr, fixed))}, fixed by the trigger "
                "(a caller cannot override a trigger's fixed inputs)"
            )
        inputs.update(body)
    else:
        raise InputError("the webhook body must be a JSON object, or the trigger must map it")
    return inputs


def read_body(body: bytes) -> Any:
    """The webhook body as JSON (empty: {}). Strict UTF-8: json.loads on bytes would let
    surrogates encoded as bytes through. The request boundary (api/boundary.py) has refused
    what JSON may hold but cannot be stored, whatever the content type."""
    if not body:
        return {}
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"the webhook body is not UTF-8 text (byte {exc.start})") from None
    except (ValueError, RecursionError):  # RecursionError: nesting too deep to read
        raise InputError("the webhook body is not JSON") from None


class TriggerService:
    def __init__(
        self,
        engine: Engine,
        apps: AppService,
        runs: RunService,
        secrets: Secrets,
        *,
        poll: float = POLL,
        queue: RunQueue | None = None,
        webhooks: WebhookPolicy | None = None,
    ) -> None:
        self.engine = engine
        self.apps = apps
        self.runs = runs
        self.secrets = secrets
        self.poll = poll
        self.webhooks = webhooks or WebhookPolicy()
        # Queue mode (services/queue): a firing queues its run for a worker.
        self.queue = queue
        self._task: asyncio.Task[None] | None = None

    # -- managing ---------------------------------------------------------------------------

    def create(self, app_ref: str, spec: Mapping[str, Any]) -> Trigger:
        app = self.apps.get_app(app_ref)
        trigger = Trigger(app_id=app.id, **dict(spec))
        self._check(trigger)
        if trigger.kind == "cron":
            # The first tick is the first after now: creating a schedule never fires the past.
            trigger.last_tick = utcnow()
        with session(self.engine) as db:
            TriggerRepository(db).add(trigger)
            db.commit()
        return trigger

    def _check(self, trigger: Trigger) -> None:
        if trigger.kind not in KINDS:
            raise TriggerError(f"kind must be one of {', '.join(KINDS)}")
        if trigger.catch_up not in CATCH_UP:
            raise TriggerError(f"catch_up must be one of {', '.join(CATCH_UP)}")
        if trigger.kind == "cron":
            if not trigger.cron:
                raise TriggerError("a cron trigger needs a cron schedule")
            check_schedule(trigger.cron, trigger.timezone)
        elif trigger.cron:
            raise TriggerError("a webhook trigger has no cron schedule")
        if trigger.secret_name is not None:
            try:
                check_secret_name(trigger.secret_name)
            except ValueError as exc:
                raise TriggerError(str(exc)) from None
        if trigger.kind == "webhook" and trigger.enabled:  # a disabled one fires nothing
            self._check_webhook(trigger)

    def _check_webhook(self, trigger: Trigger) -> None:
        """A webhook anyone could call unsigned would start runs for anyone: it needs a
        secret that is set (and not empty), and no mapping onto a fixed input."""
        if not trigger.secret_name:
            raise TriggerError(
                "a webhook needs secret_name: the name of a secret (set it first with PUT "
                "/api/v1/secrets/{name}) whose value signs its calls"
            )
        try:
            value = self.secrets.get(trigger.secret_name)
        except SecretNotFoundError:
            value = ""
        if not value:
            raise TriggerError(
                f"secret {trigger.secret_name!r} is not set (or empty): set it first with "
                f"PUT /api/v1/secrets/{trigger.secret_name}, then name it here"
            )
        both = sorted(set(trigger.input_map) & set(trigger.inputs))
        if both:
            raise TriggerError(
                f"input_map maps {', '.join(map(repr, both))}, which inputs fixes: "
                "a fixed input cannot come from the body"
            )

    def for_app(self, app_ref: str) -> list[Trigger]:
        app = self.apps.get_app(app_ref)
        with session(self.engine) as db:
            return TriggerRepository(db).of_app(app.id)

    def get(self, trigger_id: str) -> Trigger:
        with session(self.engine) as db:
            return TriggerRepository(db).find(trigger_id)

    def update(self, trigger_id: str, changes: Mapping[str, Any]) -> Trigger:
        with session(self.engine) as db:
            trigger = TriggerRepository(db).find(trigger_id)
            for name, value in changes.items():
                if value is None and name not in ("cron", "secret_name"):
                    raise TriggerError(f"{name} cannot be null")
                setattr(trigger, name, value)
            self._check(trigger)
            if trigger.kind == "cron" and ("enabled" in changes or "cron" in changes):
                trigger.last_tick = utcnow()  # re-enabled or rescheduled: from now on
            db.commit()
            return trigger

    def delete(self, trigger_id: str) -> None:
        with session(self.engine) as db:
            store = TriggerRepository(db)
            store.delete(store.find(trigger_id))
            db.commit()

    def firings(
        self, trigger_id: str, offset: int = 0, limit: int = DEFAULT_LIMIT
    ) -> Page[TriggerFiring]:
        """Newest tick first."""
        at = window(offset, limit)
        with session(self.engine) as db:
            store = TriggerRepository(db)
            return store.firings(store.find(trigger_id).id, at)

    # -- firing -----------------------------------------------------------------------------

    def _claim(self, trigger: Trigger, tick: datetime) -> TriggerFiring | None:
        """The firing row for the tick, if this replica is the one that inserted it."""
        firing = TriggerFiring(
            trigger_id=trigger.id, tick=tick, status="started", replica=self.runs.lease_id
        )
        with session(self.engine) as db:
            if not TriggerRepository(db).claim(trigger, firing):
                return None  # another replica fired this tick
            db.commit()
        return firing

    def _settle(self, firing_id: str, run_id: str | None, error: str | None) -> None:
        with session(self.engine) as db:
            TriggerRepository(db).settle(firing_id, run_id, error)
            db.commit()

    async def fire(
        self, trigger: Trigger, tick: datetime, inputs: Mapping[str, Any]
    ) -> TriggerFiring | None:
        """Claim the tick and start the run; None when another replica had claimed it. A run
        that cannot start (no published version, bad inputs) is a failed firing."""
        firing = await asyncio.to_thread(self._claim, trigger, tick)
        if firing is None:
            return None

        async def launch() -> str:
            version, plan = await asyncio.to_thread(self._published, trigger.app_id)
            return await self._launch(trigger, version.id, plan, inputs)

        return await self._run_firing(firing, launch())

    def _published(self, app_id: str) -> tuple[Version, CompiledFlow]:
        version = self.apps.get_version(app_id, "published")
        return version, self.apps.compiled(version)

    async def _launch(
        self, trigger: Trigger, version_id: str, plan: CompiledFlow, inputs: Mapping[str, Any]
    ) -> str:
        """The run of a firing, started here or queued for a worker (queue mode)."""
        if self.queue is not None:
            from dagwright.services.queue.jobs import Priority

            return await self.queue.submit(
                plan,
                inputs,
                app_id=trigger.app_id,
                version_id=version_id,
                mode=trigger.kind,
                priority=Priority.SCHEDULED,
            )
        live = await self.runs.start(
            plan, inputs, app_id=trigger.app_id, version_id=version_id, mode=trigger.kind
        )
        return live.run_id

    async def _run_firing(
        self, firing: TriggerFiring, launching: Coroutine[Any, Any, str]
    ) -> TriggerFiring:
        """Start a claimed firing's run and settle the firing whatever happens: with its run,
        or failed with the error (an unexpected one is settled, then raised)."""
        run_id: str | None = None
        error: str | None = None
        try:
            run_id = await launching
        except DagwrightError as exc:
            error = f"{exc.code}: {exc.message}"
        except BaseException as exc:  # a bug or a cancel: never leave the firing `started`
            error = f"internal: {type(exc).__name__}"
            await asyncio.shield(asyncio.to_thread(self._settle, firing.id, None, error))
            raise
        await asyncio.shield(asyncio.to_thread(self._settle, firing.id, run_id, error))
        firing.run_id, firing.error = run_id, error
        firing.status = "failed" if error else "started"
        return firing

    async def tick_once(self, now: datetime | None = None) -> list[TriggerFiring]:
        """One scheduler pass: fire the due ticks of every enabled cron trigger."""
        now = now or utcnow()
        triggers = await asyncio.to_thread(self._cron_triggers)
        fired: list[TriggerFiring] = []
        for trigger in triggers:
            after = _aware(trigger.last_tick) or _aware(trigger.created_at) or now
            assert trigger.cron is not None
            ticks = ticks_between(trigger.cron, trigger.timezone, after, now)
            chosen = due_ticks(ticks, now, trigger.catch_up)
            if ticks and not chosen:  # all missed and skipped: move past them
                await asyncio.to_thread(self._advance, trigger.id, ticks[-1])
            for tick in chosen:
                firing = await self.fire(trigger, tick, trigger.inputs)
                if firing is not None:
                    fired.append(firing)
        return fired

    def _cron_triggers(self) -> list[Trigger]:
        with session(self.engine) as db:
            return TriggerRepository(db).enabled_cron()

    def _advance(self, trigger_id: str, tick: datetime) -> None:
        with session(self.engine) as db:
            TriggerRepository(db).advance(trigger_id, tick)
            db.commit()

    async def receive(
        self, trigger_id: str, body: bytes, signatures: list[str], timestamps: list[str]
    ) -> TriggerFiring:
        """A webhook call (the module doc): checked whole, then fired. Nothing is written
        for a call that is unsigned, badly signed, stale, replayed, rate-limited, or whose
        body or inputs do not fit."""
        trigger = await asyncio.to_thread(self.get, trigger_id)
        if trigger.kind != "webhook" or not trigger.enabled:
            raise NotFoundError(f"no webhook {trigger_id!r}")
        secret = await asyncio.to_thread(self._secret_of, trigger)
        now = utcnow()
        signed = verify(
            secret,
            body,
            signatures,
            timestamps,
            now=now.timestamp(),
            tolerance=self.webhooks.tolerance,
        )
        inputs = webhook_inputs(trigger, read_body(body))
        version, plan = await asyncio.to_thread(self._published, trigger.app_id)
        check_input_types(plan, inputs)  # as a published call's inputs are checked
        resolve_inputs(plan, inputs)  # unknown and missing inputs, before any row
        # Remembered as long as its timestamp would pass: after that it is refused as stale.
        expires = datetime.fromtimestamp(signed.timestamp + self.webhooks.tolerance, UTC)
        firing = await asyncio.to_thread(self._claim_call, trigger, signed.digest, expires)

        async def launch() -> str:
            return await self._launch(trigger, version.id, plan, inputs)

        return await self._run_firing(firing, launch())

    def _secret_of(self, trigger: Trigger) -> str:
        """The webhook's secret; a webhook without one (made before secrets were required,
        or whose secret was deleted) accepts no calls."""
        try:
            value = self.secrets.get(trigger.secret_name) if trigger.secret_name else ""
        except SecretNotFoundError:
            value = ""
        if not value:
            raise AuthError(
                "this webhook has no secret set, so no call can be verified: an admin must "
                "set one (PATCH /api/v1/triggers/{id} with secret_name) before it fires",
                "webhook_unsigned",
            )
        return value

    def _claim_call(self, trigger: Trigger, digest: str, expires: datetime) -> TriggerFiring:
        limit = self.webhooks.rate_limit
        while True:  # two calls in the same microsecond: the later one takes the next
            firing = TriggerFiring(
                trigger_id=trigger.id, tick=utcnow(), status="started", replica=self.runs.lease_id
            )
            with session(self.engine) as db:
                claim: WebhookClaim = TriggerRepository(db).claim_webhook(
                    firing, digest, expires, limit
                )
                if claim.firing is not None:
                    db.commit()
                    return claim.firing
            if claim.replayed:
                raise AuthError(
                    "this signed call was received before (a replay): sign each call anew, "
                    f"with a fresh {TIMESTAMP_HEADER}",
                    "signature_replayed",
                )
            if claim.limited is not None:
                raise WebhookRateLimitedError(
                    f"this webhook fired {limit} times in the last minute, its limit "
                    f"(DAGWRIGHT_WEBHOOK_RATE_LIMIT); try again in {claim.limited:.0f}s",
                    claim.limited,
                )

    # -- the scheduler ----------------------------------------------------------------------

    def start(self) -> None:
        """Run the scheduler on the running loop until close()."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="dagwright-triggers"
            )

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick_once()
            except Exception:  # a bad pass must not stop the schedules: log, try again
                log.warning("trigger scheduler pass failed", exc_info=True)
            await asyncio.sleep(self.poll)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
