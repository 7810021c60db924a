"""Deployment material: the Helm chart, the Dockerfile and the Slack app manifest."""
