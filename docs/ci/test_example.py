"""Tests that call a model, as people write them; recorded once, replayed in CI (docs/ci.md)."""

MODEL = "gpt-4o-mini"


def ask(client, messages):
    answer = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    return answer.choices[0].message.content


def test_one_question(openai_client):
    reply = ask(openai_client, [{"role": "user", "content": "Name the capital of Portugal."}])
    assert reply


def test_a_follow_up(openai_client):
    messages = [{"role": "user", "content": "Name a river in Portugal."}]
    first = ask(openai_client, messages)
    messages += [
        {"role": "assistant", "content": first},
        {"role": "user", "content": "Which city does it reach the sea at?"},
    ]
    second = ask(openai_client, messages)
    assert first and second
