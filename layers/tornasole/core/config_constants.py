"""smdebug's configuration constants (``smdebug.core.config_constants``), for code that imports them.

Only the names about hook configuration, paths and files are kept; their
values are smdebug's, so scripts comparing against them keep working.
"""

from __future__ import annotations

from tornasole.config import (
    SAGEMAKER_HOOK_CONFIG_PATH,
    SAGEMAKER_TENSORBOARD_CONFIG_PATH,
    SMDEBUG_HOOK_CONFIG_PATH,
    TENSORBOARD_CONFIG_PATH,
)

CONFIG_FILE_PATH_ENV_STR = SMDEBUG_HOOK_CONFIG_PATH
DEFAULT_CONFIG_FILE_PATH = SAGEMAKER_HOOK_CONFIG_PATH
TENSORBOARD_CONFIG_FILE_PATH_ENV_STR = TENSORBOARD_CONFIG_PATH
DEFAULT_SAGEMAKER_TENSORBOARD_PATH = SAGEMAKER_TENSORBOARD_CONFIG_PATH
DEFAULT_SAGEMAKER_OUTDIR = "/opt/ml/output/tensors"
DEFAULT_SAGEMAKER_METRICS_PATH = "SAGEMAKER_METRICS_DIRECTORY"
DEFAULT_RESOURCE_CONFIG_FILE = "/opt/ml/input/config/resourceconfig.json"
DEFAULT_WORKER_NAME = "worker_0"
DEFAULT_COLLECTIONS_FILE_NAME = "worker_0_collections.json"
DEFAULT_SAVED_COLLECTIONS = ["losses"]
EXPORT_TENSORBOARD_KEY = "export_tensorboard"
TENSORBOARD_DIR_KEY = "tensorboard_dir"
CONFIG_OUTDIR_KEY = "LocalPath"
CONFIG_HOOK_PARAMS_KEY = "HookParameters"
CONFIG_COLLECTION_CONFIG_KEY = "CollectionConfigurations"
CONFIG_COLLECTION_NAME_KEY = "CollectionName"
CONFIG_COLLECTION_PARAMS_KEY = "CollectionParameters"
CONFIG_DRYRUN_KEY = "dry_run"
CONFIG_RDN_CFG_KEY = "reduction_config"
CONFIG_INCLUDE_REGEX_KEY = "include_regex"
CONFIG_INCLUDE_WORKERS_KEY = "include_workers"
CONFIG_SAVE_ALL_KEY = "save_all"
CONFIG_REDUCTION_CONFIGS_KEY = "reduction_configs"
CONFIG_SAVE_CONFIGS_KEY = "save_configs"
TRAINING_END_DELAY_REFRESH_KEY = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
TRAINING_END_DELAY_REFRESH_DEFAULT = 1
