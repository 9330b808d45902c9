"""The job board: `lambdajobs board`, a web page for a stack's jobs, queues, dead letters and
schedules (the `lambdajobs[board]` extra: Starlette, Jinja2, uvicorn; htmx is served from
`static/`). Never shipped to Lambda.

    from lambdajobs.board import create_app
    app = create_app(StackConfig(stack="prod", jobs="myjobs"), read_only=True)   # any ASGI server
"""

from lambdajobs.board.app import create_app

__all__ = ["create_app"]
