"""Every error class carries the exit code SPEC.md documents."""

from __future__ import annotations

import inspect

import cortexctl.errors as errors

DOCUMENTED = {
    "CortexError": 1, "UsageError": 2, "AmbiguousRef": 2, "ConfigError": 2, "NotFound": 3, "StoreBusy": 4,
    "RateLimited": 5, "BudgetUnreachable": 6, "IntegrityError": 7, "Refused": 8, "ProviderUnreachable": 9, "StoreUnreachable": 9,
    "InvalidData": 10, "Tombstoned": 1, "SchemaTooNew": 1, "NotForgotten": 1,
}


def test_every_error_class_has_its_documented_exit_code():
    classes = {n: c for n, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.CortexError)}
    assert set(classes) == set(DOCUMENTED)
    for name, cls in classes.items():
        assert cls.exit_code == DOCUMENTED[name], name
        assert cls.exit_code in errors.EXIT_CODES.values()
        if cls.kind in errors.EXIT_CODES:
            assert errors.EXIT_CODES[cls.kind] == cls.exit_code, name


def test_error_json_names_kind_message_and_code():
    err = errors.StoreBusy("store /x is busy", hint="retry")
    assert err.to_json() == {"error": "busy", "message": "store /x is busy", "exit_code": 4, "hint": "retry"}
