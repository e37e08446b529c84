"""The shared input rules (makeroom.model.limits): every number finite and in range, whole where
Kubernetes counts whole units; a broken value is always an InvalidValueError with a message, never an
OverflowError, a decimal.Overflow or a number that is not one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from makeroom.model import Resources, limits
from makeroom.model.quantity import (
    MAX_DURATION,
    MAX_QUANTITY,
    QuantityError,
    QuantityRangeError,
    parse_duration,
    parse_quantity,
)
from makeroom.model.resources import ResourceIndex
from makeroom.scenario.files import json_depth


@pytest.mark.parametrize(
    "text", ["10Pi", "1e30", 1e308, "1.0e308", "9999999Ei", "1e999999999", "2Pi", "-10Pi", 10**30]
)
def test_a_quantity_beyond_1pi_is_a_range_error(text: object) -> None:
    with pytest.raises(QuantityRangeError, match="at most 1Pi"):
        parse_quantity(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "inf", "nan", "Infinity", "1e", "x" * 500])
def test_a_quantity_that_is_no_number_is_refused(value: object) -> None:
    with pytest.raises(QuantityError, match="expected a quantity"):
        parse_quantity(value)  # type: ignore[arg-type]


def test_the_largest_quantity_fits_a_numpy_vector_eight_times_over() -> None:
    assert parse_quantity("1Pi") == MAX_QUANTITY
    assert parse_quantity("1e-30") == 1  # rounded up to a milli-unit, as Kubernetes rounds
    assert parse_quantity("-1e-30") == 0
    index = ResourceIndex(["memory"])
    total = sum((Resources({"memory": MAX_QUANTITY}).vector(index) for _ in range(8)), np.zeros(3, np.int64))
    assert int(total[index.position("memory")]) == 8 * MAX_QUANTITY  # no wrap-around


@pytest.mark.parametrize(
    "value",
    [math.inf, math.nan, "inf", "nan", "1e999999999", "1e999999999s", 10**400, "9999999999999h", 1e12],
)
def test_a_duration_must_be_finite_and_at_most_a_year(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_duration(value)  # type: ignore[arg-type]
    assert parse_duration("8784h") == MAX_DURATION


def test_counts_priorities_and_numbers() -> None:
    assert limits.count(3, high=5) == 3
    for bad in (True, 3.0, "3", -1, 6, None):
        with pytest.raises(limits.InvalidValueError, match="from 0 to 5"):
            limits.count(bad, high=5)
    with pytest.raises(limits.InvalidValueError, match="-2147483648 to 2147483647"):
        limits.priority(2**31)
    for not_a_share in (math.nan, math.inf, "inf", "nan", True, "abc", [1]):
        with pytest.raises(limits.InvalidValueError):
            limits.ratio(not_a_share)
    assert limits.price("0.5") == 0.5  # a flag's or a cell's text
    with pytest.raises(limits.InvalidValueError, match="at most 1e\\+06"):
        limits.price(1e300)


def test_intervals_have_a_floor_and_timeouts_must_be_positive() -> None:
    assert limits.interval("2s") == 2.0
    for bad in ("0s", 0, "1ms", 1e-9):
        with pytest.raises(limits.InvalidValueError, match=r"at least 0\.1s"):
            limits.interval(bad)
    with pytest.raises(limits.InvalidValueError, match="more than 0"):
        limits.duration("0s", positive=True)
    with pytest.raises(limits.InvalidValueError, match="from 1 to"):
        limits.moves(0)


def test_extended_resources_and_pods_are_whole_units() -> None:
    assert limits.is_integer_resource("nvidia.com/gpu")
    assert limits.is_integer_resource("pods")
    assert not limits.is_integer_resource("cpu")
    assert not limits.is_integer_resource("hugepages-2Mi")
    assert not limits.is_integer_resource("kubernetes.io/batch-cpu")  # the kubernetes.io domain is native
    assert limits.resource_quantity("nvidia.com/gpu", "2") == 2000
    assert limits.resource_quantity("cpu", "0.5") == 500
    for bad in ("0.5", 0.5, "500m"):
        with pytest.raises(limits.InvalidValueError, match=r"whole number of nvidia\.com/gpu"):
            limits.resource_quantity("nvidia.com/gpu", bad)


def test_ports_and_addresses() -> None:
    assert limits.port(8080) == 8080
    with pytest.raises(limits.InvalidValueError, match="from 0 to 65535"):
        limits.port(99999)
    assert limits.ip_address("::") == "::"
    assert limits.ip_address("127.0.0.1") == "127.0.0.1"
    with pytest.raises(limits.InvalidValueError, match="an IP address"):
        limits.ip_address("not-an-ip")


def test_json_depth_is_measured_without_recursion_and_outside_strings() -> None:
    assert json_depth("[" * 100_000 + "]" * 100_000) == 100_000
    assert json_depth('{"a": [{"b": 1}]}') == 3
    assert json_depth('{"a": "' + "[" * 500 + '"}') == 1  # text, not nesting
    assert json_depth('{"a": "\\"' + ', "b": [[]]}') == 3  # an escaped backslash ends no string
