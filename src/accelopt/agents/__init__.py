"""The agents: planner, executor, fixer, summarizer. Each turns typed input into messages (a
Jinja2 template), calls its chat model (``llm.chat.ChatModel``: the real ``LLMClient``, or the
in-process ``ScriptedChat`` in tests) once, and parses the reply at one boundary."""
