"""Scenario files (spec v1): schema, rules and conversion to model objects."""

from makeroom.errors import InputError, Problem
from makeroom.scenario.load import Scenario, load_scenario, parse_scenario, read_yaml

__all__ = ["InputError", "Problem", "Scenario", "load_scenario", "parse_scenario", "read_yaml"]
