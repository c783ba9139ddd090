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
