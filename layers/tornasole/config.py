"""Names of the environment variables Tornasole reads (values are read where used, never at import)."""

from __future__ import annotations

# Seconds the reader waits after seeing the end marker before treating every step as complete.
TRAINING_END_DELAY_REFRESH = "TORNASOLE_TRAINING_END_DELAY_REFRESH"
# Hook configuration file (SageMaker DebugHookConfig shape); SageMaker's own path is honoured as well.
HOOK_CONFIG_PATH = "TORNASOLE_CONFIG_FILE_PATH"
SAGEMAKER_HOOK_CONFIG_PATH = "/opt/ml/input/config/debughookconfig.json"
# The variable SageMaker (and smdebug) use for the same file; read after HOOK_CONFIG_PATH.
SMDEBUG_HOOK_CONFIG_PATH = "SMDEBUG_CONFIG_FILE_PATH"
# SageMaker's TensorBoardOutputConfig file ({"LocalPath": ..., "S3OutputPath": ...}) and its override.
TENSORBOARD_CONFIG_PATH = "TENSORBOARD_CONFIG_FILE_PATH"
SAGEMAKER_TENSORBOARD_CONFIG_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"
# Any of 1/true/yes/on turns every hook into a no-op without touching the training script.
HOOK_DISABLED = "TORNASOLE_HOOK_DISABLED"
# Set on SageMaker: the hook does not write the end marker (FORMAT.md 7.1).
TRAINING_JOB_NAME = "TRAINING_JOB_NAME"
# Threads used for concurrent reads.
READ_THREADS = "TORNASOLE_READ_THREADS"
# Local mode: 0/false/no/off turns its speed patches to moto off (tornasole.local.moto_patches).
MOTO_SPEED_PATCHES = "TORNASOLE_MOTO_SPEED_PATCHES"
# Local mode: 1 applies its correctness patches on a moto outside the checked versions (to check one).
MOTO_UNCHECKED = "TORNASOLE_MOTO_UNCHECKED"
# Keras hook: 1 turns its taps on private Keras attributes on for a release outside the checked ones
# (tornasole.keras.versions), to check one.
KERAS_UNCHECKED = "TORNASOLE_KERAS_UNCHECKED"
# Evaluator / handler settings.
STATE_TABLE = "TORNASOLE_STATE_TABLE"
EVENT_BUS = "TORNASOLE_EVENT_BUS"
EVENT_SOURCE = "TORNASOLE_EVENT_SOURCE"
ALERT_TOPIC_ARN = "TORNASOLE_ALERT_TOPIC_ARN"
TRIAL_BUCKET = "TORNASOLE_TRIAL_BUCKET"
# Alert destinations the operator configured ("webhook:oncall,slack:ml-team"): registration refuses others.
ALERT_DESTINATIONS = "TORNASOLE_ALERT_DESTINATIONS"
# The profiler (docs/PROFILER.md): 1/true/yes/on or a JSON object turns it on for every hook.
PROFILER = "TORNASOLE_PROFILER"
# SageMaker's profilerconfig.json and the variable smdebug reads its path from.
SMPROFILER_CONFIG_PATH = "SMPROFILER_CONFIG_PATH"
SAGEMAKER_PROFILER_CONFIG_PATH = "/opt/ml/input/config/profilerconfig.json"
