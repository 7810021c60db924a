"""An embedded Slack: Web API, Socket Mode and signed HTTP-mode delivery that real slack_sdk and Bolt accept.

Start it with `sim.slack.runner.BackgroundSlack`; point the bot at it only through
`WebClient(token=..., base_url=slack.api_url)`.
"""
