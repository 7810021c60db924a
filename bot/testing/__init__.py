"""The harness that starts the embedded cluster, the Slack emulator and the real bot together, in-process.

One set-up for `gpubot demo`, the tests, the bench and the soak, as `kopf.testing.KopfRunner` runs an
operator for its users' tests: `stage` starts the sim, the emulator and a Redis on loopback ports;
`bot_settings` and `serve_environment` point the bot at them (in this process or as `gpubot serve`);
`running_bot` runs it until the block ends. Like `bot.cli`, the one other place allowed to import both the
product and the simulator; the production image, which has no simulator, never imports it.
"""
