"""validate()'s provider rules (docs/RULES.md): ``provider`` names the rule set of AI
SDK messages; a bad one is invalid_request at /provider (a non-string: OptionError)."""

from typing import Any, Dict, List

import pytest

from ctxcompact import CompactError, Compactor, OptionError

UNSIGNED: List[Dict[str, Any]] = [
    {"role": "user", "content": "Port it."},
    {"role": "assistant", "content": [{"type": "reasoning", "text": "read a"}, {"type": "text", "text": "done"}]},
]


def test_validate_checks_ai_sdk_messages_under_the_provider_named() -> None:
    with Compactor() as c:
        assert c.validate(UNSIGNED, format="ai-sdk") == {"ok": True, "problems": []}
        res = c.validate(UNSIGNED, format="ai-sdk", provider="anthropic")
        assert res["ok"] is False
        assert [(p["code"], p["path"]) for p in res["problems"]] == [("thinking_signature_missing", "/messages/1/content/0")]


def test_validate_refuses_a_provider_it_has_no_rules_for() -> None:
    with Compactor() as c:
        with pytest.raises(CompactError) as e:
            c.validate(UNSIGNED, format="ai-sdk", provider="mistral")
        assert (e.value.code, e.value.path) == ("invalid_request", "/provider")
        with pytest.raises(OptionError):
            c.validate(UNSIGNED, provider=1)  # type: ignore[arg-type]


def test_validate_takes_the_ai_sdk_provider_from_the_config() -> None:
    """The Compactor's config, or the call's merged over it; an explicit provider wins."""
    with Compactor({"model": {"provider": "anthropic"}}) as c:
        assert [p["code"] for p in c.validate(UNSIGNED, format="ai-sdk")["problems"]] == ["thinking_signature_missing"]
        assert c.validate(UNSIGNED, format="ai-sdk", config={"model": {"provider": "openrouter"}}) == {"ok": True, "problems": []}
        assert c.validate(UNSIGNED, format="ai-sdk", provider="openai") == {"ok": True, "problems": []}
    with Compactor() as c:
        with pytest.raises(CompactError) as e:
            c.validate(UNSIGNED, config={"model": {"provider": 7}})  # type: ignore[dict-item]
        assert (e.value.code, e.value.path) == ("invalid_config", "/config/model/provider")
