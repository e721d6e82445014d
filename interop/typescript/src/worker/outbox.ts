/** The messages a client stream sends, pushed as they come: an async iterable a Connect
 * streaming call reads from (a generator: Connect needs its iterator's throw and return). */
export class Outbox<T> implements AsyncIterable<T> {
  private readonly queued: T[] = [];
  private wake: (() => void) | undefined;
  private ended = false;

  push(message: T): void {
    if (this.ended) return;
    this.queued.push(message);
    this.woken();
  }

  /** No more messages: the stream's sending side closes once the queued ones are sent. */
  end(): void {
    this.ended = true;
    this.woken();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const message = this.queued.shift();
      if (message !== undefined) {
        yield message;
      } else if (this.ended) {
        return;
      } else {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
      }
    }
  }

  private woken(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
