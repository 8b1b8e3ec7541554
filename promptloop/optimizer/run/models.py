"""The models of one command: build, share, meter, preflight and close the clients.

`ModelSet` hands out the agent, judge and proposer clients of eval, optimize, review and
nightly. Clients are built on first use from the model ids (or injected, for tests); roles whose
model id and base URL agree share one client object. Every client handed out is metered under
its role, so `ModelSet.spend` is the command's single usage account. `preflight` checks each
distinct client once (one cheap call before any trial runs), and leaving the `async with` block
closes the clients the set built (injected ones belong to the caller).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

from pydantic import BaseModel

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.registry import ModelOptions, create_client, parse_model_id
from promptloop.agents.llm.types import ModelClient, Usage
from promptloop.optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError, default_judge
from promptloop.optimizer.core.pricing import ModelPrice
from promptloop.optimizer.core.redact import register_secret
from promptloop.optimizer.run.usage import ROLES, Meter, MeteredClient, Role, Spend, batch_role_of


def make_client(
    model_id: str, base_url: str | None = None, timeout_s: float = 120.0, max_retries: int = 4
) -> ModelClient:
    """A client for `model_id`. `base_url` (--base-url) is the OpenAI-compatible server, so it
    only applies to `openai:` ids; Anthropic reads ANTHROPIC_BASE_URL itself."""
    try:
        return create_client(
            model_id,
            ModelOptions(
                base_url=_url_for(model_id, base_url), timeout_s=timeout_s, max_retries=max_retries
            ),
        )
    except ModelConfigError as err:
        raise ConfigError(str(err)) from err


def check_base_url(url: str | None) -> None:
    """`--base-url` is an http(s) URL with a host: anything else is a user error naming the
    flag (before any key lookup, whose message would blame the key)."""
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--base-url {url!r} is not a URL: give the server's address with "
                          "its scheme, e.g. http://localhost:8080/v1")


def _url_for(model_id: str, base_url: str | None) -> str | None:
    provider, _ = parse_model_id(model_id)
    return base_url if provider == "openai" else None


@dataclass(frozen=True)
class ModelIds:
    """The model ids of one command (+ where an OpenAI-compatible server lives)."""

    agent: str = DEFAULT_AGENT_MODEL
    judge: str | None = None
    """None: a stronger model of the agent's provider (`default_judge`)."""
    proposer: str | None = None
    """None: the agent model."""
    base_url: str | None = None

    def __post_init__(self) -> None:
        check_base_url(self.base_url)

    @property
    def judge_id(self) -> str:
        return self.judge or default_judge(self.agent)

    @property
    def proposer_id(self) -> str:
        return self.proposer or self.agent

    def of(self, role: Role) -> str:
        return {"agent": self.agent, "judge": self.judge_id, "proposer": self.proposer_id}[role]


class AgentJudgeModels(BaseModel):
    """The model fields of a command's config (review: agent and judge), in one place: the
    defaults (the embedded model; the judge a stronger model of the agent's provider, see
    `core.config.default_judge`) and the ids they resolve to."""

    agent_model: str = DEFAULT_AGENT_MODEL
    judge_model: str | None = None
    base_url: str | None = None

    @property
    def model_ids(self) -> ModelIds:
        return ModelIds(agent=self.agent_model, judge=self.judge_model,
                        proposer=getattr(self, "proposer_model", None), base_url=self.base_url)

    @property
    def judge_id(self) -> str:
        return self.model_ids.judge_id


class CommandModels(AgentJudgeModels):
    """`AgentJudgeModels` plus the proposer (optimize, nightly): the agent model by default."""

    proposer_model: str | None = None

    @property
    def proposer_id(self) -> str:
        return self.model_ids.proposer_id


class _RoleClient(MeteredClient):
    """A metered client whose preflight runs once per underlying client of the set."""

    def __init__(self, inner: ModelClient, models: ModelSet, role: Role) -> None:
        super().__init__(inner, models.meter, role)
        self._models = models

    async def preflight(self) -> None:
        await self._models.preflight_client(self.inner)


class ModelSet:
    """The agent, judge and proposer clients of one command (see the module docstring).

    `agent`/`judge`/`proposer` inject ready clients (tests); a role without one reuses an
    injected client of the same model id, else gets a client built from `ids`."""

    def __init__(
        self,
        ids: ModelIds,
        *,
        agent: ModelClient | None = None,
        judge: ModelClient | None = None,
        proposer: ModelClient | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.ids = ids
        self.prices = prices
        """Price overrides (`[nightly.prices]`) `usd()` applies when given none."""
        register_secret(ids.base_url)  # its password, if any, never reaches a file
        self.meter = Meter()
        given: dict[Role, ModelClient | None] = {
            "agent": agent,
            "judge": judge,
            "proposer": proposer,
        }
        self._given: dict[Role, ModelClient] = {r: c for r, c in given.items() if c is not None}
        self._shared: dict[tuple[str, str | None], ModelClient] = {}
        for role, client in self._given.items():
            self._shared.setdefault(self._key(role), client)
        self._owned: list[ModelClient] = []
        self._roles: dict[Role, _RoleClient] = {}
        self._checked: list[ModelClient] = []

    # --- clients --------------------------------------------------------------------------
    def _key(self, role: Role) -> tuple[str, str | None]:
        """Clients are shared by model id and the base URL that applies to it."""
        try:
            model_id = self.ids.of(role)
            return model_id, _url_for(model_id, self.ids.base_url)
        except ModelConfigError as err:
            raise ConfigError(str(err)) from err

    def client(self, role: Role) -> ModelClient:
        """The metered client of `role`, built on first use."""
        if role not in self._roles:
            inner = self._given.get(role)
            if inner is None:
                key = self._key(role)
                if key not in self._shared:
                    self._shared[key] = make_client(key[0], self.ids.base_url)
                    self._owned.append(self._shared[key])
                inner = self._shared[key]
            self._roles[role] = _RoleClient(inner, self, role)
        return self._roles[role]

    @property
    def agent(self) -> ModelClient:
        return self.client("agent")

    @property
    def judge(self) -> ModelClient:
        return self.client("judge")

    @property
    def proposer(self) -> ModelClient:
        return self.client("proposer")

    def build(self, *roles: Role) -> None:
        """Build the clients of `roles` now, so a bad model id fails before anything runs."""
        for role in roles or ROLES:
            self.client(role)

    # --- preflight --------------------------------------------------------------------------
    async def preflight(self, *roles: Role) -> None:
        """One cheap call per distinct client of `roles` (each client is checked only once)."""
        for role in roles:
            await self.client(role).preflight()

    async def preflight_client(self, client: ModelClient) -> None:
        if any(c is client for c in self._checked):
            return
        await client.preflight()
        self._checked.append(client)

    # --- usage ------------------------------------------------------------------------------
    @property
    def spend(self) -> Spend:
        """Usage per role of every response so far."""
        return self.meter.spend

    @property
    def usage(self) -> Usage:
        return self.meter.spend.total

    def usd(self, prices: Mapping[str, ModelPrice] | None = None) -> float | None:
        """Estimated dollars so far (None once a model's price is unknown)."""
        used = {batch_role_of(key)[0] for key in self.meter.spend.usage}
        models: dict[str, str] = {role: self._key(role)[0] for role in ROLES if role in used}
        return self.meter.spend.usd(models, prices if prices is not None else self.prices)

    # --- lifetime ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        owned, self._owned = self._owned, []
        for client in owned:
            await client.aclose()

    async def __aenter__(self) -> ModelSet:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


__all__ = ["ModelIds", "ModelSet", "make_client"]
