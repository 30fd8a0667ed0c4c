"""The planner page (`wattgpu ui`): ask, compare GPUs and recommend one in a browser, answered by wattgpu.planning."""
