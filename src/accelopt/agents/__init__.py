"""The agents: planner, executor, fixer, summarizer. Each turns typed input into messages (a
Jinja2 template), calls the LLM client once, and parses the reply at one boundary."""
