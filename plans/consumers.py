"""/ws/plans/<id>/: signed-in users (everyone reads plans) hear of every change of one plan
and of its releases.

The socket joins the plan's change group (its saves and its cells', plans/apps.py) and the
groups of the releases the plan started or brought back (each release tick publishes there,
releases/events.py); a plan change may add a release, so the set is read again then. Each
message names what changed and the plan's phase; the page fetches its grid again."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts.waits import group_name
from plans import selectors
from releases import events as release_events

UNAUTHORIZED = 4401
NOT_FOUND = 4404


class PlanConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        self.joined: set[str] = set()
        self.plan_id = int(self.scope["url_route"]["kwargs"]["plan_id"])
        if await self._follow() is None:
            await self.close(code=NOT_FOUND)
            return
        await self.accept()

    async def _follow(self) -> str | None:
        """Join the groups of the plan and of its releases now; the plan's phase."""
        phase, releases = await database_sync_to_async(selectors.plan_followed)(
            plan_id=self.plan_id
        )
        if phase is None:
            return None
        wanted = {group_name("plan", self.plan_id), *map(release_events.group, releases)}
        for name in wanted - self.joined:
            await self.channel_layer.group_add(name, self.channel_name)
        self.joined |= wanted
        return phase

    async def disconnect(self, code):
        for name in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(name, self.channel_name)

    async def resource_changed(self, message):
        phase = await self._follow()
        await self.send_json({"changed": "plan", "plan": self.plan_id, "phase": phase})

    async def release_event(self, message):
        payload = message.get("payload") or {}
        await self.send_json(
            {"changed": "release", "release": payload.get("id"), "phase": payload.get("phase")}
        )
