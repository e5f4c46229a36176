"""The one place Homing's version is written (User-Agent: Homing/<version>)."""

VERSION = "0.1.0"
