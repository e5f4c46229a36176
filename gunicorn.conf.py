# Read by gunicorn from the working directory (the repo root, as the Procfile runs it).
# Command-line flags (the Procfile's) override what is set here.
import os
from pathlib import Path

from config.env import env, read_dotenv

read_dotenv(Path(__file__).resolve().parent)  # LOG_FORMAT may come from .env
logger_class = "config.gunicorn.HomingLogger"  # LOG_FORMAT=json for gunicorn's own lines

# HOMING_TRUST_PROXY is the one switch for believing a proxy's X-Forwarded-* headers
# (config/settings.py). gunicorn would otherwise take the scheme from X-Forwarded-Proto
# on its own whenever the proxy is on loopback, and from nobody when it is not.
if "FORWARDED_ALLOW_IPS" not in os.environ:  # gunicorn's own variable, if set, wins
    forwarded_allow_ips = "*" if env.bool("HOMING_TRUST_PROXY", default=False) else ""
