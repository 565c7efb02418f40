"""text2reward: language-model-written dense rewards for MuJoCo robot tasks, validated and trained."""

__version__ = "0.1.0"
