# Read by gunicorn from the working directory (the repo root, as the Procfile runs it).
# Command-line flags (the Procfile's) override what is set here.
from pathlib import Path

from config.env import read_dotenv

read_dotenv(Path(__file__).resolve().parent)  # LOG_FORMAT may come from .env
logger_class = "config.gunicorn.HomingLogger"  # LOG_FORMAT=json for gunicorn's own lines
