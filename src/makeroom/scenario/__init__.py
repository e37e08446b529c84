"""Scenario files (spec v1): schema, rules and conversion to model objects."""

from makeroom.errors import InputError, Problem
from makeroom.scenario.files import read_data, read_yaml
from makeroom.scenario.load import Scenario, load_scenario, parse_scenario

__all__ = ["InputError", "Problem", "Scenario", "load_scenario", "parse_scenario", "read_data", "read_yaml"]
