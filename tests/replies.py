"""Replies a model might send, shared by tests of different stages."""

REACH_REPLY = '''```python
import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    reach = float(np.exp(-10.0 * distance))
    return reach, {"reach": reach}
```
'''
"""A fenced reward for a Sawyer or Fetch view that passes every check: the hand's closeness to the goal."""
