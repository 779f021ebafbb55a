"""Every method of every capability and of ``Storage`` is called by the contract suite: a new
protocol method without a contract test fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortexctl.store.interface import CAPABILITIES, Holding, Storage
from tests.contract.conftest import methods

HERE = Path(__file__).parent


def _called() -> set[str]:
    """The names called as ``.name(`` in the contract test modules (this one aside)."""
    names: set[str] = set()
    for path in HERE.glob("test_*.py"):
        if path.name != Path(__file__).name:
            names.update(re.findall(r"\.([A-Za-z_]\w*)\(", path.read_text()))
    return names


@pytest.mark.parametrize("protocol", [*CAPABILITIES, Storage, Holding], ids=lambda p: p.__name__)
def test_every_protocol_method_is_called_by_a_contract_test(protocol):
    missing = sorted(methods(protocol) - _called())
    assert not missing, f"{protocol.__name__} methods without a contract test: {missing}"
