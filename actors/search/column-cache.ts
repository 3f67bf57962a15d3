/**
 * The memory columns of a search replica (sort columns, term columns) share one keeping policy: per field path a
 * column, or null when the path cannot be kept in memory (the SQL path serves it), the least recently used dropped
 * beyond a small number so memory stays bounded whatever fields queries name.
 */
export const MAX_COLUMNS = 8;

export class ColumnCache<C extends object> {
  /** Oldest use first (Map keeps insertion order); null: the path cannot be kept here. */
  protected readonly columns = new Map<string, C | null>();

  clear(): void {
    this.columns.clear();
  }

  /** The paths held in memory now (for tests and diagnostics). */
  held(): string[] {
    return [...this.columns].filter(([, column]) => column !== null).map(([path]) => path);
  }

  /** A path's column, loaded when missing (then the least recently used beyond MAX_COLUMNS are dropped). */
  protected use(path: string, load: () => C | null): C | null {
    let column = this.columns.get(path);
    if (column === undefined) {
      column = load();
      this.columns.set(path, column);
      this.evict();
    } else {
      this.columns.delete(path);
      this.columns.set(path, column);
    }
    return column;
  }

  private evict(): void {
    let live = 0;
    for (const column of this.columns.values()) if (column) live++;
    for (const [path, column] of this.columns) {
      if (live <= MAX_COLUMNS) break;
      if (column) live--;
      this.columns.delete(path);
    }
  }
}
