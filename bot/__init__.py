"""gpubot: Slack chat-ops for a shared, scale-from-zero GPU node pool on Kubernetes."""
