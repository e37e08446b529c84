"""The seed scenarios, bundled so that `makeroom demo` runs on a fresh install."""
